/**
 * A customer's tasks and their submissions; read-only, archived documents left out of submissions.
 */
import type { RouteHandlers } from '../http/types.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { presentRecord, presentTaskSubmission } from './presenters.ts';
import { notFound } from './problems.ts';

/** Handlers of tasks and their submissions (read-only). */
export function taskHandlers(context: DomainContext): RouteHandlers {
  return {
    listTasks: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return listResponse(request, ownedBy(env.tasks, customer.id), presentRecord);
    },

    getTask: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return dataResponse(
        presentRecord(requireOwned(env.tasks, customer.id, pathParam(request, 'taskId'), 'task')),
      );
    },

    listTaskSubmissions: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const task = requireOwned(env.tasks, customer.id, pathParam(request, 'taskId'), 'task');
      const submissions = [...env.taskSubmissions.values()].filter(
        (submission) => submission.taskId === task.id,
      );
      return listResponse(request, submissions, presentTaskSubmission(env));
    },

    getTaskSubmission: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const task = requireOwned(env.tasks, customer.id, pathParam(request, 'taskId'), 'task');
      const submissionId = pathParam(request, 'submissionId');
      const submission = env.taskSubmissions.get(submissionId);
      if (submission?.taskId !== task.id) throw notFound('task submission', submissionId);
      return dataResponse(presentTaskSubmission(env)(submission));
    },
  };
}
