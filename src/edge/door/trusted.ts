/**
 * The door's `trusted-document` step: with a manifest (`TRUSTED_DOCUMENTS`), which text a request
 * may run, for every transport alike. The manifest itself, its formats and its reloads are in
 * `../trusted-documents.ts`.
 */
import { createHash } from 'node:crypto';
import type { Logger } from '../../logger.ts';
import type { TrustedDocumentsMode } from '../config.ts';
import { refuse, type Refusal } from '../refusal.ts';
import {
  resolveTrustedDocument,
  type TrustedDocumentRequest,
  type TrustedDocumentResolution,
  type TrustedDocumentStore,
} from '../trusted-documents.ts';
import type { Connection } from './door.ts';

/** Why an operation is not a trusted document. */
export type UntrustedReason = Extract<TrustedDocumentResolution, { ok: false }>['reason'];

/** What the step is built from (the door's options). */
export interface TrustedDocumentOptions {
  /** `TRUSTED_DOCUMENTS`; absent, any document is accepted. */
  trustedDocuments?: TrustedDocumentStore | undefined;
  /**
   * `TRUSTED_DOCUMENTS_MODE`: `log-only` runs a request's own `query` that the manifest does not
   * list (logged and counted) instead of refusing it. Default `enforce`.
   */
  trustedDocumentsMode?: TrustedDocumentsMode | undefined;
  /** Told of every operation missing from the manifest, refused or let through (metrics); must not throw. */
  onUntrustedDocument?(reason: UntrustedReason, action: 'refused' | 'logged'): void;
}

/**
 * The text to run for `request` under trusted documents: a listed id's stored body, or the
 * request's own text when listed; undefined when nothing limits it (no manifest, an operator, an
 * anonymous request) and the request's own `query` runs.
 */
export function trustedQueryOf(
  options: TrustedDocumentOptions,
  logger: Logger,
  connection: Connection,
  request: TrustedDocumentRequest,
): string | undefined | Refusal {
  const store = options.trustedDocuments;
  // Operators keep free-form documents (and so Sandbox in their hands); an anonymous request
  // gets here only with `_service` or public introspection.
  if (store === undefined || connection.caller === undefined || connection.caller.operator) return undefined;
  const resolution = resolveTrustedDocument(store, request);
  if (resolution.ok) return resolution.query;
  // Log-only runs the request's own text; with no text (an unknown id alone) nothing could run.
  const ownQuery = typeof request.query === 'string' && request.query !== '' ? request.query : undefined;
  const runsAnyway = options.trustedDocumentsMode === 'log-only' && ownQuery !== undefined;
  options.onUntrustedDocument?.(resolution.reason, runsAnyway ? 'logged' : 'refused');
  if (!runsAnyway) {
    return refuse('not-trusted-document', 'This operation is not in the list of trusted documents.');
  }
  logger.warn('operation not in the trusted documents: run anyway (TRUSTED_DOCUMENTS_MODE=log-only)', {
    reason: resolution.reason,
    subject: connection.caller.subject,
    // The client's own name, cut short: the text itself may be long, its hash identifies it.
    operationName:
      typeof request.operationName === 'string' ? request.operationName.slice(0, 100) : undefined,
    documentSha256: createHash('sha256').update(ownQuery).digest('hex'),
  });
  return undefined;
}
