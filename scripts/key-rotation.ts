/**
 * Rotating the facade's upstream key as an operator does: a new key added at the emulator
 * (`/_emulator/keys`, beside the old one), written into a mounted-secret directory the way the
 * kubelet replaces a Secret (a new timestamped directory, then the `..data` symlink swapped), and
 * the old key revoked at the emulator after the window. Used by the rotation test and
 * bench/key-rotation.ts.
 */
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A directory laid out as the kubelet mounts a Secret, with the key at `file`. */
export interface MountedSecret {
  readonly dir: string;
  /** `dir/<name>`, a symlink through `..data` to the current version. */
  readonly file: string;
  /** Writes a new version and swaps `..data` to it in one rename (as the kubelet does). */
  replace(content: string): void;
}

/** A Secret directory holding `content` under `name` (`api-key`). */
export function mountedSecret(content: string, name = 'api-key'): MountedSecret {
  const dir = mkdtempSync(join(tmpdir(), 'upstream-key-'));
  let version = 0;
  const write = (text: string): void => {
    version += 1;
    const versionDir = `..${new Date().toISOString().replace(/[:.]/g, '_')}.${version}`;
    mkdirSync(join(dir, versionDir));
    writeFileSync(join(dir, versionDir, name), text);
    symlinkSync(versionDir, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  };
  write(content);
  symlinkSync(join('..data', name), join(dir, name));
  return { dir, file: join(dir, name), replace: write };
}

/** `POST /_emulator/keys`: `key` accepted as one more key of the identity `id`. */
export async function addEmulatorKey(emulatorUrl: string, key: string, id: string): Promise<void> {
  await emulatorControl(emulatorUrl, '/_emulator/keys', { key, id }, 201);
}

/** `POST /_emulator/keys/revoke`: `key` refused (401) from now on. */
export async function revokeEmulatorKey(emulatorUrl: string, key: string): Promise<void> {
  await emulatorControl(emulatorUrl, '/_emulator/keys/revoke', { key }, 200);
}

async function emulatorControl(url: string, path: string, body: unknown, expected: number): Promise<void> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (response.status !== expected) {
    throw new Error(`Emulator control POST ${path} answered ${response.status}: ${await response.text()}`);
  }
}

/** One operation of {@link runRotationLoad}. */
export interface LoadOperation {
  readonly kind: 'query' | 'mutation';
  /** When it started, in `performance.now()` milliseconds. */
  readonly startedMs: number;
  readonly latencyMs: number;
  /** Answered 200 with data and no error. */
  readonly ok: boolean;
  /** What went wrong (status and error codes), when it did not succeed. */
  readonly failure?: string;
  /** The mutation's top-up amount was credited once by this acknowledged operation. */
  readonly acknowledged?: boolean;
}

/** The account the mutations top up and the queries read (the emulator's demo data, no sweep rule). */
export const LOAD_ACCOUNT = { customerId: 'cus_globex', accountId: 'acc_globex_eth' } as const;
/** Each top-up's amount. */
export const TOP_UP_AMOUNT = '1.00';

const QUERY = /* GraphQL */ `
  query RotationRead($customerId: ID!, $id: ID!) {
    account(customerId: $customerId, id: $id) {
      id
      balances {
        available
      }
    }
  }
`;
const TOP_UP = /* GraphQL */ `
  mutation RotationTopUp($input: SandboxTopUpInput!) {
    sandboxTopUp(input: $input) {
      replayed
      topUp {
        id
      }
    }
  }
`;

/**
 * Runs `workers` loops, each sending a query then a top-up (with an Idempotency-Key of its own)
 * until `stop()` says so, and returns every operation. `headers` carry the credentials.
 */
export async function runRotationLoad(options: {
  graphqlUrl: string;
  headers: () => Promise<Record<string, string>> | Record<string, string>;
  workers: number;
  stop: () => boolean;
  /** Wait between one worker's operations (0: back to back). */
  pauseMs?: number;
}): Promise<LoadOperation[]> {
  const operations: LoadOperation[] = [];
  let sequence = 0;
  const send = async (kind: LoadOperation['kind'], body: unknown): Promise<void> => {
    const startedMs = performance.now();
    let failure: string | undefined;
    try {
      const response = await fetch(options.graphqlUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await options.headers()) },
        body: JSON.stringify(body),
      });
      const json = (await response.json()) as {
        data?: unknown;
        errors?: { extensions?: { code?: unknown } }[];
      };
      if (response.status !== 200 || json.errors !== undefined || json.data == null) {
        const codes = (json.errors ?? []).map((error) => {
          const code = error.extensions?.code;
          return typeof code === 'string' ? code : 'error';
        });
        failure = `${response.status} ${codes.join(',')}`;
      }
    } catch (error) {
      failure = (error as Error).message;
    }
    const latencyMs = performance.now() - startedMs;
    operations.push({
      kind,
      startedMs,
      latencyMs,
      ok: failure === undefined,
      ...(failure === undefined ? {} : { failure }),
      ...(kind === 'mutation' ? { acknowledged: failure === undefined } : {}),
    });
  };
  const worker = async (index: number): Promise<void> => {
    while (!options.stop()) {
      await send('query', {
        query: QUERY,
        variables: { customerId: LOAD_ACCOUNT.customerId, id: LOAD_ACCOUNT.accountId },
      });
      sequence += 1;
      await send('mutation', {
        query: TOP_UP,
        variables: {
          input: {
            ...LOAD_ACCOUNT,
            amount: TOP_UP_AMOUNT,
            currency: 'USDC',
            idempotencyKey: `rotation-${process.pid}-${index}-${sequence}`,
          },
        },
      });
      if ((options.pauseMs ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, options.pauseMs));
    }
  };
  await Promise.all(Array.from({ length: options.workers }, (_, index) => worker(index)));
  return operations;
}

/** The account's available USDC as the emulator holds it (its ledger), read with `apiKey`. */
export async function ledgerBalance(emulatorUrl: string, apiKey: string): Promise<number> {
  const response = await fetch(
    `${emulatorUrl}/v3/customers/${LOAD_ACCOUNT.customerId}/accounts/${LOAD_ACCOUNT.accountId}`,
    { headers: { 'x-api-key': apiKey } },
  );
  if (response.status !== 200) throw new Error(`The emulator answered ${response.status} for the account`);
  const body = (await response.json()) as { data: { balances: { currency: string; available: string }[] } };
  const usdc = body.data.balances.find((balance) => balance.currency === 'USDC');
  if (usdc === undefined) throw new Error('The account holds no USDC balance');
  return Number(usdc.available);
}
