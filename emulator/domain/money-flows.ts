/**
 * How money moves inside the emulator: balances credited and debited, transfers that start
 * pending and settle after `transferSettleMs`, and the rules that sweep a watched wallet
 * whenever it is credited ("Rules in action" in docs/upstream-assumptions.md).
 */
import { formatAmount, parseAmount } from '../store/decimal.ts';
import type { ScaledAmount } from '../store/decimal.ts';
import type { EnvironmentStore } from '../store/environment-store.ts';
import { newId } from '../store/ids.ts';
import type { AccountRecord, Environment, MoneyTarget, TransferRecord } from '../store/records.ts';
import type { DomainContext } from './context.ts';
import { presentRecord } from './presenters.ts';

/** Announces `account.updated` with the account as a read now returns it. */
export function emitAccountUpdated(
  context: DomainContext,
  environment: Environment,
  account: AccountRecord,
): void {
  context.emit(environment, 'account.updated', {
    customerId: account.customerId,
    resourceType: 'account',
    resourceId: account.id,
    object: presentRecord(account),
    occurredAt: account.updatedAt,
  });
}

function emitTransfer(
  context: DomainContext,
  environment: Environment,
  type: 'transfer.created' | 'transfer.completed',
  transfer: TransferRecord,
): void {
  context.emit(environment, type, {
    customerId: transfer.customerId,
    resourceType: 'transfer',
    resourceId: transfer.id,
    object: presentRecord(transfer),
    occurredAt: transfer.updatedAt,
  });
}

/** Whether the account keeps balances: issued wallets do; external wallets and bank accounts do not. */
export function holdsBalances(account: AccountRecord): boolean {
  return account.type === 'wallet' && account.origin === 'issued';
}

/** The `available` amount of `currency` on the account (zero when it has no such balance). */
export function availableAmount(account: AccountRecord, currency: string): ScaledAmount {
  const balance = account.balances.find((candidate) => candidate.currency === currency);
  return balance ? parseAmount(balance.available) : 0n;
}

/** Changes `available` of `currency` by `delta` and stamps the account. Emits `account.updated`. */
export function adjustAvailable(
  context: DomainContext,
  environment: Environment,
  account: AccountRecord,
  currency: string,
  delta: ScaledAmount,
): void {
  let balance = account.balances.find((candidate) => candidate.currency === currency);
  if (!balance) {
    balance = { currency, available: '0.00', pending: '0.00' };
    account.balances.push(balance);
  }
  balance.available = formatAmount(parseAmount(balance.available) + delta);
  account.updatedAt = context.stamp();
  emitAccountUpdated(context, environment, account);
}

/** A transfer about to start. */
export type TransferPlan = {
  customerId: string;
  source: AccountRecord;
  /** What leaves the source. */
  amount: ScaledAmount;
  currency: string;
  target: MoneyTarget;
  /** What reaches an account target when the transfer completes (differs from `amount` for a quote). */
  credit: { amount: ScaledAmount; currency: string };
  ruleId: string | null;
  quoteId: string | null;
};

/**
 * Starts a transfer: debits the source's `available` at once, records the transfer as
 * `pending`, and schedules its completion. `sweptAccounts` carries the wallets already swept
 * in this chain of rule transfers, so two rules pointing at each other cannot loop forever.
 */
export function startTransfer(
  context: DomainContext,
  environment: Environment,
  plan: TransferPlan,
  sweptAccounts: ReadonlySet<string> = new Set(),
): TransferRecord {
  const env = context.env(environment);
  adjustAvailable(context, environment, plan.source, plan.currency, -plan.amount);
  const now = context.stamp();
  const transfer: TransferRecord = {
    id: newId('trf'),
    customerId: plan.customerId,
    state: 'pending',
    amount: formatAmount(plan.amount),
    currency: plan.currency,
    source: { accountId: plan.source.id },
    target: structuredClone(plan.target),
    ruleId: plan.ruleId,
    quoteId: plan.quoteId,
    completedAt: null,
    createdAt: now,
    updatedAt: now,
  };
  env.transfers.set(transfer.id, transfer);
  emitTransfer(context, environment, 'transfer.created', transfer);
  context.schedule(context.transferSettleMs, () =>
    completeTransfer(context, environment, env, transfer, plan.credit, sweptAccounts),
  );
  return transfer;
}

function completeTransfer(
  context: DomainContext,
  environment: Environment,
  env: EnvironmentStore,
  transfer: TransferRecord,
  credit: TransferPlan['credit'],
  sweptAccounts: ReadonlySet<string>,
): void {
  // A reset replaces the environment; a transfer of the old data has nowhere to land.
  if (context.env(environment) !== env || transfer.state !== 'pending') return;
  const now = context.stamp();
  transfer.state = 'completed';
  transfer.completedAt = now;
  transfer.updatedAt = now;
  emitTransfer(context, environment, 'transfer.completed', transfer);

  const targetAccountId = transfer.target.account?.accountId;
  const target = targetAccountId === undefined ? undefined : env.accounts.get(targetAccountId);
  if (!target || !holdsBalances(target)) return;
  adjustAvailable(context, environment, target, credit.currency, credit.amount);
  sweepIfWatched(context, environment, target, credit.currency, sweptAccounts);
}

/**
 * Called after `account` was credited with `currency`: when an active rule watches it, sweeps
 * the whole available amount of that currency to the rule's target.
 */
export function sweepIfWatched(
  context: DomainContext,
  environment: Environment,
  account: AccountRecord,
  currency: string,
  sweptAccounts: ReadonlySet<string> = new Set(),
): TransferRecord | undefined {
  if (sweptAccounts.has(account.id)) return undefined;
  const env = context.env(environment);
  const rule = [...env.rules.values()].find(
    (candidate) => candidate.status === 'active' && candidate.trigger.accountId === account.id,
  );
  if (!rule) return undefined;
  const amount = availableAmount(account, currency);
  if (amount <= 0n) return undefined;
  return startTransfer(
    context,
    environment,
    {
      customerId: rule.customerId,
      source: account,
      amount,
      currency,
      target: rule.action,
      credit: { amount, currency },
      ruleId: rule.id,
      quoteId: null,
    },
    new Set([...sweptAccounts, account.id]),
  );
}
