/**
 * The accounts of a customer: list, get, create and archive, with issued wallets given an address
 * and balances, and `account.created` / `account.updated` announced after each change.
 */
import type { RouteHandlers } from '../http/types.ts';
import { newId } from '../store/ids.ts';
import type { AccountRecord, Environment } from '../store/records.ts';
import type { DomainContext } from './context.ts';
import { dataResponse, listResponse } from './list-response.ts';
import { ownedBy, pathParam, requireCustomer, requireOwned } from './lookups.ts';
import { emitAccountUpdated } from './money-flows.ts';
import { presentRecord } from './presenters.ts';
import { invalidFields, stateConflict } from './problems.ts';
import { issuedWalletAddress } from './wallet-addresses.ts';

type CreateAccountBody = {
  type: 'wallet';
  origin: 'issued' | 'external';
  network: string;
  currency: string;
  label: string;
  address?: string;
  isDefault?: boolean;
};

/** Handlers of the accounts group: list, get, create, archive (fees live in `account-fees.ts`). */
export function accountHandlers(context: DomainContext): RouteHandlers {
  function findAccount(environment: Environment, customerId: string, accountId: string): AccountRecord {
    const env = context.env(environment);
    requireCustomer(env, customerId);
    return requireOwned(env.accounts, customerId, accountId, 'account');
  }

  return {
    listAccounts: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      return listResponse(request, ownedBy(env.accounts, customer.id), presentRecord);
    },

    getAccount: (request) => {
      const account = findAccount(
        request.environment,
        pathParam(request, 'customerId'),
        pathParam(request, 'accountId'),
      );
      return dataResponse(presentRecord(account));
    },

    createAccount: (request) => {
      const env = context.env(request.environment);
      const customer = requireCustomer(env, pathParam(request, 'customerId'));
      const body = request.body as CreateAccountBody;
      if (body.origin === 'issued' && body.address !== undefined) {
        throw invalidFields([
          {
            pointer: '/address',
            code: 'invalid_value',
            message:
              'The platform assigns the address of an issued wallet; send address only for external wallets.',
          },
        ]);
      }
      const siblings = ownedBy(env.accounts, customer.id).filter((account) => account.archivedAt === null);
      // A customer's first account is its default unless the caller says otherwise.
      const isDefault = body.isDefault ?? siblings.length === 0;
      const now = context.stamp();
      const id = newId('acc');
      const issued = body.origin === 'issued';
      const account: AccountRecord = {
        id,
        customerId: customer.id,
        type: 'wallet',
        network: body.network,
        origin: body.origin,
        status: 'ready',
        openTaskIds: [],
        currency: body.currency,
        label: body.label,
        isDefault,
        details: {
          network: body.network,
          address: issued ? issuedWalletAddress(body.network, id) : body.address!,
        },
        fees: { breakdown: { developer: null } },
        balances: issued ? [{ currency: body.currency, available: '0.00', pending: '0.00' }] : [],
        createdAt: now,
        updatedAt: now,
        archivedAt: null,
      };
      env.accounts.set(id, account);
      context.emit(request.environment, 'account.created', {
        customerId: customer.id,
        resourceType: 'account',
        resourceId: id,
        object: presentRecord(account),
        occurredAt: now,
      });
      if (isDefault) {
        // One default account per customer: the previous default steps down.
        for (const sibling of siblings.filter((candidate) => candidate.isDefault)) {
          sibling.isDefault = false;
          sibling.updatedAt = context.stamp();
          emitAccountUpdated(context, request.environment, sibling);
        }
      }
      return dataResponse(presentRecord(account), 201);
    },

    archiveAccount: (request) => {
      const env = context.env(request.environment);
      const account = findAccount(
        request.environment,
        pathParam(request, 'customerId'),
        pathParam(request, 'accountId'),
      );
      if (account.archivedAt !== null) {
        throw stateConflict('account_archived', `Account ${account.id} is already archived.`);
      }
      for (const rule of env.rules.values()) {
        if (rule.status === 'archived') continue;
        if (rule.trigger.accountId === account.id) {
          throw stateConflict(
            'rule_watches_account',
            `Rule ${rule.id} watches account ${account.id}; archive the rule before the account.`,
          );
        }
        if (rule.action.account?.accountId === account.id) {
          throw stateConflict(
            'rule_targets_account',
            `Rule ${rule.id} sends funds to account ${account.id}; archive the rule before the account.`,
          );
        }
      }
      const pending = [...env.transfers.values()].filter(
        (transfer) =>
          transfer.state === 'pending' &&
          (transfer.source.accountId === account.id || transfer.target.account?.accountId === account.id),
      );
      if (pending.length > 0) {
        throw stateConflict(
          'pending_transfers',
          `Account ${account.id} has pending transfers; wait for them to complete, then archive it.`,
          {
            blockingResources: pending.map((transfer) => ({
              type: 'transfer',
              id: transfer.id,
              requiredAction: 'wait_for_transfer',
            })),
          },
        );
      }
      const now = context.stamp();
      account.status = 'archived';
      account.archivedAt = now;
      account.updatedAt = now;
      emitAccountUpdated(context, request.environment, account);
      return dataResponse(presentRecord(account));
    },
  };
}
