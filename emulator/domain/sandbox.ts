/**
 * The sandbox-only operations: topping up an issued wallet with test funds, and forcing a
 * capability's status (with what that does to its institution applications).
 */
import { randomBytes } from 'node:crypto';
import type { RouteHandlers } from '../http/types.ts';
import { parseAmount } from '../store/decimal.ts';
import { newId } from '../store/ids.ts';
import type { StatusReason } from '../store/records.ts';
import { emitCapabilityChange } from './capabilities.ts';
import type { DomainContext } from './context.ts';
import { dataResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { adjustAvailable, availableAmount, holdsBalances, sweepIfWatched } from './money-flows.ts';
import { presentRecord } from './presenters.ts';
import { invalidCapability, invalidFields, notFound, stateConflict } from './problems.ts';

/** The largest balance the contract's money pattern allows: 12 integer digits, 6 decimals. */
const MAX_BALANCE = parseAmount('999999999999.999999');

type TopUpBody = { amount: string; currency: string };
type ForcedStatus = 'ready' | 'rejected' | 'restricted';

/** Where each forced capability status leaves the institution applications. */
const APPLICATION_STATUS: Record<ForcedStatus, string> = {
  ready: 'approved',
  rejected: 'rejected',
  restricted: 'restricted',
};

function forcedReason(status: ForcedStatus): StatusReason | null {
  if (status === 'ready') return null;
  return {
    code: 'sandbox_forced',
    message: `Status forced to ${status} through the sandbox.`,
    actor: 'developer',
    retryable: false,
  };
}

/** Handlers of the sandbox group: the top-up and the capability status forcing. */
export function sandboxHandlers(context: DomainContext): RouteHandlers {
  return {
    sandboxTopUp: (request) => {
      const env = context.env(request.environment);
      const accountId = pathParam(request, 'accountId');
      const account = env.accounts.get(accountId);
      if (!account) throw notFound('account', accountId);
      if (!holdsBalances(account)) {
        throw stateConflict(
          'account_not_issued_wallet',
          `Account ${account.id} is not an issued wallet; only issued wallets can be topped up.`,
        );
      }
      if (account.archivedAt !== null) {
        throw stateConflict(
          'account_archived',
          `Account ${account.id} is archived and cannot receive funds.`,
        );
      }
      const body = request.body as TopUpBody;
      if (body.currency !== account.currency) {
        throw invalidFields([
          {
            pointer: '/currency',
            code: 'invalid_value',
            message: `Account ${account.id} holds ${account.currency}; top up in that currency.`,
          },
        ]);
      }

      const amount = parseAmount(body.amount);
      if (availableAmount(account, body.currency) + amount > MAX_BALANCE) {
        throw invalidFields([
          {
            pointer: '/amount',
            code: 'out_of_range',
            message: 'The balance would exceed 12 integer digits, the largest amount the API represents.',
          },
        ]);
      }
      adjustAvailable(context, request.environment, account, body.currency, amount);
      const id = newId('tu');
      const network = account.network ?? 'unknown';
      const result = {
        id,
        type: 'wallet_to_wallet',
        state: 'completed',
        from: { rail: 'sandbox', identifier: 'sandbox_faucet', amount: body.amount, currency: body.currency },
        to: { identifier: account.details.address ?? account.id },
        url: `https://sandbox.platform.test/topups/${id}`,
        onchainUrl: `https://explorer.sandbox.platform.test/${network}/tx/0x${randomBytes(32).toString('hex')}`,
      };
      // Rules match at the account credit, so the top-up is what sets a sweep going.
      sweepIfWatched(context, request.environment, account, body.currency);
      return dataResponse(result);
    },

    sandboxSetCapabilityStatus: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const capability = requireOwned(
        env.capabilities,
        customer.id,
        pathParam(request, 'capabilityId'),
        'capability',
      );
      if (capability.applications.length === 0) {
        const forceable = ownedBy(env.capabilities, customer.id)
          .filter((candidate) => candidate.applications.length > 0)
          .sort((a, b) =>
            a.createdAt === b.createdAt ? a.id.localeCompare(b.id) : a.createdAt.localeCompare(b.createdAt),
          )
          .map((candidate) => candidate.id);
        throw invalidCapability(
          `Capability ${capability.id} has no institution application to simulate, so its status cannot be forced.`,
          forceable,
        );
      }
      const status = (request.body as { status: ForcedStatus }).status;
      const statusChanged = capability.status !== status;
      const applicationStatus = APPLICATION_STATUS[status];
      const applicationsChange = capability.applications.some(
        (application) => application.status !== applicationStatus,
      );
      if (statusChanged || applicationsChange) {
        const now = context.stamp();
        const reason = forcedReason(status);
        capability.status = status;
        capability.statusReason = reason;
        capability.updatedAt = now;
        for (const application of capability.applications) {
          application.status = applicationStatus;
          application.statusReason = reason && { ...reason };
          application.updatedAt = now;
        }
        // The event announces a status change; aligning applications alone is not one.
        if (statusChanged)
          emitCapabilityChange(context, request.environment, 'capability.status_changed', capability);
      }
      return dataResponse(presentRecord(capability));
    },
  };
}
