/** Institutions: `/v3/institutions`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord } from './request.ts';
import { restPath } from './rest-path.ts';
import type { Institution, Page, PageParams } from './types.ts';

/** Reads one page of institutions. */
export function listInstitutions(up: UpstreamContext, page?: PageParams): Promise<Page<Institution>> {
  return readPage<Institution>(up, '/v3/institutions', page);
}

/** Reads one institution. */
export function getInstitution(up: UpstreamContext, institutionId: string): Promise<Institution> {
  return readRecord<Institution>(up, restPath`/v3/institutions/${institutionId}`);
}
