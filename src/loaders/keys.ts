/**
 * The keys loaders are called with, and the strings that identify them. Two loads whose strings are
 * equal are one upstream request.
 */
import type { PageParams } from '../upstream/types.ts';

/** A record whose REST path is its id alone: `/v3/<resource>/{id}` (`/v3/customers/{id}`). */
export interface TopLevelKey {
  id: string;
}

/** A record whose REST path holds its customer: `/v3/customers/{customerId}/<resource>/{id}`. */
export interface ScopedKey {
  customerId: string;
  id: string;
}

/** One page of a top-level list (`/v3/customers`, `/v3/institutions`, `/v3/webhooks`). */
export type PageKey = PageParams;

/** One page of a customer's list (`/v3/customers/{customerId}/<resource>`). */
export interface ScopedPageKey extends PageParams {
  customerId: string;
}

/** One page of a task's submissions. */
export interface TaskSubmissionsPageKey extends ScopedPageKey {
  taskId: string;
}

/** One submission of a task: its path holds the customer and the task. */
export interface TaskSubmissionKey extends ScopedKey {
  taskId: string;
}

/** Identifies a {@link TaskSubmissionKey}. */
export function taskSubmissionCacheKey(key: TaskSubmissionKey): string {
  return `${key.customerId}/${key.taskId}/${key.id}`;
}

/** Identifies a {@link ScopedKey}. Ids never contain `/`, the separator of their REST path. */
export function scopedCacheKey(key: ScopedKey): string {
  return `${key.customerId}/${key.id}`;
}

/**
 * Identifies a page: the list's owner and every parameter that changes the answer, in a fixed
 * order, so `{limit, cursor}` and `{cursor, limit}` are one request.
 */
export function pageCacheKey(key: PageKey & { customerId?: string; taskId?: string }): string {
  return JSON.stringify([
    key.customerId ?? null,
    key.taskId ?? null,
    key.limit ?? null,
    key.cursor ?? null,
    key.updatedSince ?? null,
  ]);
}
