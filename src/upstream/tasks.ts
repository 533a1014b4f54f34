/** Tasks and task submissions: `/v3/customers/{customerId}/tasks`. */
import type { UpstreamContext } from './context.ts';
import { readPage, readRecord } from './request.ts';
import { restPath } from './rest-path.ts';
import type { Page, PageParams, Task, TaskSubmission } from './types.ts';

/** Reads one page of a customer's tasks. */
export function listTasks(up: UpstreamContext, customerId: string, page?: PageParams): Promise<Page<Task>> {
  return readPage<Task>(up, restPath`/v3/customers/${customerId}/tasks`, page);
}

/** Reads one task of a customer. */
export function getTask(up: UpstreamContext, customerId: string, taskId: string): Promise<Task> {
  return readRecord<Task>(up, restPath`/v3/customers/${customerId}/tasks/${taskId}`);
}

/** Reads one page of a task's submissions. */
export function listTaskSubmissions(
  up: UpstreamContext,
  customerId: string,
  taskId: string,
  page?: PageParams,
): Promise<Page<TaskSubmission>> {
  return readPage<TaskSubmission>(
    up,
    restPath`/v3/customers/${customerId}/tasks/${taskId}/submissions`,
    page,
  );
}

/** Reads one submission of a task. */
export function getTaskSubmission(
  up: UpstreamContext,
  customerId: string,
  taskId: string,
  submissionId: string,
): Promise<TaskSubmission> {
  return readRecord<TaskSubmission>(
    up,
    restPath`/v3/customers/${customerId}/tasks/${taskId}/submissions/${submissionId}`,
  );
}
