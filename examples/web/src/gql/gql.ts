/* eslint-disable */
import * as types from './graphql';
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';

/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "subscription AccountChanges($customerId: ID!) {\n  accountChanged(customerId: $customerId) {\n    eventId\n    type\n    occurredAt\n    accountId\n    account {\n      ...AccountSummary\n    }\n  }\n}": typeof types.AccountChangesDocument,
    "query MyCustomers {\n  customers(first: 10) {\n    nodes {\n      id\n      displayName\n    }\n  }\n}\n\nquery Dashboard($customerId: ID!, $first: Int!, $after: String) {\n  customer(id: $customerId) {\n    id\n    displayName\n    type\n    accounts(first: $first, after: $after) {\n      edges {\n        cursor\n        node {\n          ...AccountSummary\n        }\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n}\n\nfragment AccountSummary on Account {\n  id\n  customerId\n  label\n  type\n  network\n  currency\n  balances {\n    currency\n    available\n    pending\n  }\n  updatedAt\n}": typeof types.MyCustomersDocument,
    "query LiveBalance($customerId: ID!) @live {\n  customer(id: $customerId) {\n    id\n    accounts(first: 10) {\n      edges {\n        node {\n          id\n          currency\n          balances {\n            currency\n            available\n            pending\n          }\n        }\n      }\n    }\n  }\n}": typeof types.LiveBalanceDocument,
    "mutation TopUp($input: SandboxTopUpInput!) {\n  sandboxTopUp(input: $input) {\n    idempotencyKey\n    topUp {\n      id\n      state\n    }\n    account {\n      ...AccountSummary\n    }\n  }\n}": typeof types.TopUpDocument,
};
const documents: Documents = {
    "subscription AccountChanges($customerId: ID!) {\n  accountChanged(customerId: $customerId) {\n    eventId\n    type\n    occurredAt\n    accountId\n    account {\n      ...AccountSummary\n    }\n  }\n}": types.AccountChangesDocument,
    "query MyCustomers {\n  customers(first: 10) {\n    nodes {\n      id\n      displayName\n    }\n  }\n}\n\nquery Dashboard($customerId: ID!, $first: Int!, $after: String) {\n  customer(id: $customerId) {\n    id\n    displayName\n    type\n    accounts(first: $first, after: $after) {\n      edges {\n        cursor\n        node {\n          ...AccountSummary\n        }\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n}\n\nfragment AccountSummary on Account {\n  id\n  customerId\n  label\n  type\n  network\n  currency\n  balances {\n    currency\n    available\n    pending\n  }\n  updatedAt\n}": types.MyCustomersDocument,
    "query LiveBalance($customerId: ID!) @live {\n  customer(id: $customerId) {\n    id\n    accounts(first: 10) {\n      edges {\n        node {\n          id\n          currency\n          balances {\n            currency\n            available\n            pending\n          }\n        }\n      }\n    }\n  }\n}": types.LiveBalanceDocument,
    "mutation TopUp($input: SandboxTopUpInput!) {\n  sandboxTopUp(input: $input) {\n    idempotencyKey\n    topUp {\n      id\n      state\n    }\n    account {\n      ...AccountSummary\n    }\n  }\n}": types.TopUpDocument,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 *
 *
 * @example
 * ```ts
 * const query = graphql(`query GetUser($id: ID!) { user(id: $id) { name } }`);
 * ```
 *
 * The query argument is unknown!
 * Please regenerate the types.
 */
export function graphql(source: string): unknown;

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "subscription AccountChanges($customerId: ID!) {\n  accountChanged(customerId: $customerId) {\n    eventId\n    type\n    occurredAt\n    accountId\n    account {\n      ...AccountSummary\n    }\n  }\n}"): (typeof documents)["subscription AccountChanges($customerId: ID!) {\n  accountChanged(customerId: $customerId) {\n    eventId\n    type\n    occurredAt\n    accountId\n    account {\n      ...AccountSummary\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "query MyCustomers {\n  customers(first: 10) {\n    nodes {\n      id\n      displayName\n    }\n  }\n}\n\nquery Dashboard($customerId: ID!, $first: Int!, $after: String) {\n  customer(id: $customerId) {\n    id\n    displayName\n    type\n    accounts(first: $first, after: $after) {\n      edges {\n        cursor\n        node {\n          ...AccountSummary\n        }\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n}\n\nfragment AccountSummary on Account {\n  id\n  customerId\n  label\n  type\n  network\n  currency\n  balances {\n    currency\n    available\n    pending\n  }\n  updatedAt\n}"): (typeof documents)["query MyCustomers {\n  customers(first: 10) {\n    nodes {\n      id\n      displayName\n    }\n  }\n}\n\nquery Dashboard($customerId: ID!, $first: Int!, $after: String) {\n  customer(id: $customerId) {\n    id\n    displayName\n    type\n    accounts(first: $first, after: $after) {\n      edges {\n        cursor\n        node {\n          ...AccountSummary\n        }\n      }\n      pageInfo {\n        hasNextPage\n        endCursor\n      }\n    }\n  }\n}\n\nfragment AccountSummary on Account {\n  id\n  customerId\n  label\n  type\n  network\n  currency\n  balances {\n    currency\n    available\n    pending\n  }\n  updatedAt\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "query LiveBalance($customerId: ID!) @live {\n  customer(id: $customerId) {\n    id\n    accounts(first: 10) {\n      edges {\n        node {\n          id\n          currency\n          balances {\n            currency\n            available\n            pending\n          }\n        }\n      }\n    }\n  }\n}"): (typeof documents)["query LiveBalance($customerId: ID!) @live {\n  customer(id: $customerId) {\n    id\n    accounts(first: 10) {\n      edges {\n        node {\n          id\n          currency\n          balances {\n            currency\n            available\n            pending\n          }\n        }\n      }\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "mutation TopUp($input: SandboxTopUpInput!) {\n  sandboxTopUp(input: $input) {\n    idempotencyKey\n    topUp {\n      id\n      state\n    }\n    account {\n      ...AccountSummary\n    }\n  }\n}"): (typeof documents)["mutation TopUp($input: SandboxTopUpInput!) {\n  sandboxTopUp(input: $input) {\n    idempotencyKey\n    topUp {\n      id\n      state\n    }\n    account {\n      ...AccountSummary\n    }\n  }\n}"];

export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}

export type DocumentType<TDocumentNode extends DocumentNode<any, any>> = TDocumentNode extends DocumentNode<  infer TType,  any>  ? TType  : never;