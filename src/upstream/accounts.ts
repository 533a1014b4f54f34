/** Accounts and their fees: `/v3/customers/{customerId}/accounts`. */
import type { UpstreamContext } from './context.ts';
import { withCustomerId } from './customer-scoped.ts';
import { readPage, readRecord, sendEffect } from './request.ts';
import { restPath } from './rest-path.ts';
import type {
  Account,
  AccountFees,
  CreateAccountInput,
  CustomerScoped,
  MutationResult,
  Page,
  PageParams,
  ReplaceAccountFeesInput,
} from './types.ts';

/** Reads one account of a customer (with its balances and fees). */
export async function getAccount(
  up: UpstreamContext,
  customerId: string,
  accountId: string,
): Promise<CustomerScoped<Account>> {
  const account = await readRecord<Account>(up, restPath`/v3/customers/${customerId}/accounts/${accountId}`);
  return withCustomerId(account, customerId);
}

/** Reads one page of a customer's accounts; items are full records, balances and fees included. */
export async function listAccounts(
  up: UpstreamContext,
  customerId: string,
  page?: PageParams,
): Promise<Page<CustomerScoped<Account>>> {
  const result = await readPage<Account>(up, restPath`/v3/customers/${customerId}/accounts`, page);
  return { ...result, data: result.data.map((account) => withCustomerId(account, customerId)) };
}

/** Opens an account for a customer. */
export async function createAccount(
  up: UpstreamContext,
  customerId: string,
  body: CreateAccountInput,
  idempotencyKey?: string,
): Promise<MutationResult<CustomerScoped<Account>>> {
  const result = await sendEffect<Account>(
    up,
    'POST',
    restPath`/v3/customers/${customerId}/accounts`,
    body,
    idempotencyKey,
  );
  return { ...result, data: withCustomerId(result.data, customerId) };
}

/** Archives an account (it stays readable, with `archivedAt` set). */
export async function archiveAccount(
  up: UpstreamContext,
  customerId: string,
  accountId: string,
  idempotencyKey?: string,
): Promise<MutationResult<CustomerScoped<Account>>> {
  const result = await sendEffect<Account>(
    up,
    'DELETE',
    restPath`/v3/customers/${customerId}/accounts/${accountId}`,
    undefined,
    idempotencyKey,
  );
  return { ...result, data: withCustomerId(result.data, customerId) };
}

/** Reads an account's fees; `breakdown.developer` is null when no fee rule is configured. */
export function getAccountFees(
  up: UpstreamContext,
  customerId: string,
  accountId: string,
): Promise<AccountFees> {
  return readRecord<AccountFees>(up, restPath`/v3/customers/${customerId}/accounts/${accountId}/fees`);
}

/** Replaces an account's fees (a null developer fee removes it). */
export function replaceAccountFees(
  up: UpstreamContext,
  customerId: string,
  accountId: string,
  body: ReplaceAccountFeesInput,
  idempotencyKey?: string,
): Promise<MutationResult<AccountFees>> {
  return sendEffect<AccountFees>(
    up,
    'PUT',
    restPath`/v3/customers/${customerId}/accounts/${accountId}/fees`,
    body,
    idempotencyKey,
  );
}
