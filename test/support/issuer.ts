/**
 * Issuers for the caller-authentication tests. A real OpenID provider (dev-issuer/) for tokens as an
 * identity provider mints them, and an attacker's kit for everything one must not accept: a key-set
 * server on a real port whose keys the test changes (rotation, removal, outages), and tokens signed
 * with any key, algorithm and header, or forged by hand (`alg: none`, HS256 keyed with the public key).
 */
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  SignJWT,
  exportJWK,
  exportSPKI,
  generateKeyPair,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import { afterAll, beforeAll } from 'vitest';
import { startDevIssuer, type DevIssuer, type DevIssuerOptions } from '../../dev-issuer/index.ts';

export { startDevIssuer, type DevIssuer, type DevIssuerOptions };

/**
 * Starts a dev issuer (a real oidc-provider) for the enclosing `describe` (or file): started in
 * `beforeAll`, closed in `afterAll`. The returned object reads through to the running issuer, so
 * use it inside tests and hooks only.
 */
export function useDevIssuer(options: DevIssuerOptions = {}): DevIssuer {
  let current: DevIssuer | undefined;
  beforeAll(async () => {
    current = await startDevIssuer(options);
  });
  afterAll(async () => {
    await current?.close();
  });
  return new Proxy({} as DevIssuer, {
    get(_target, property) {
      if (current === undefined) throw new Error('useDevIssuer: the issuer is used before beforeAll ran');
      const value = Reflect.get(current, property) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(current) : value;
    },
  });
}

/** The facade's variables for accepting the tokens of `issuer`: spread them into a stack's `env`. */
export function devIssuerEnv(issuer: Pick<DevIssuer, 'issuer' | 'audience'>): Record<string, string> {
  return { AUTH_MODE: 'oidc', AUTH_ISSUER: issuer.issuer, AUTH_AUDIENCE: issuer.audience };
}

/** A signing key pair and its public JWK (with `kid` and `alg`), as an issuer would publish it. */
export interface TestKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
}

/** A fresh key pair for `alg` (RS256 by default), named `kid`. */
export async function createTestKey(kid: string, alg = 'RS256'): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicKey, publicJwk };
}

export interface SignOptions {
  key: TestKey;
  /** Header `kid`: default the key's; `null` leaves it out. */
  kid?: string | null;
  /** Header `alg`: default the key's. */
  alg?: string;
  /** Header `typ`: default `at+jwt`; `null` leaves it out. */
  typ?: string | null;
}

/** Signs `claims` exactly as given (no defaults added), with jose's SignJWT. */
export async function signToken(claims: JWTPayload, options: SignOptions): Promise<string> {
  const kid = options.kid === undefined ? options.key.kid : options.kid;
  const typ = options.typ === undefined ? 'at+jwt' : options.typ;
  return new SignJWT(claims)
    .setProtectedHeader({
      alg: options.alg ?? options.key.alg,
      ...(kid === null ? {} : { kid }),
      ...(typ === null ? {} : { typ }),
    })
    .sign(options.key.privateKey);
}

export function base64url(value: string | Uint8Array): string {
  return Buffer.from(value).toString('base64url');
}

/** An unsecured JWT (`alg: none`) with the given signature segment (empty by default, as RFC 7519 has it). */
export function unsignedToken(claims: JWTPayload, kid: string, signature = ''): string {
  const header = base64url(JSON.stringify({ alg: 'none', typ: 'at+jwt', kid }));
  return `${header}.${base64url(JSON.stringify(claims))}.${signature}`;
}

/**
 * The key-confusion forgery: an HS256 token whose HMAC secret is the issuer's public key (PEM), which
 * a verifier that lets the token pick the algorithm would accept with the key it holds.
 */
export async function keyConfusionToken(claims: JWTPayload, key: TestKey): Promise<string> {
  const secret = await exportSPKI(key.publicKey);
  const signingInput = `${base64url(JSON.stringify({ alg: 'HS256', typ: 'at+jwt', kid: key.kid }))}.${base64url(JSON.stringify(claims))}`;
  return `${signingInput}.${createHmac('sha256', secret).update(signingInput).digest('base64url')}`;
}

/** What the key-set server answers on its key-set path. */
export type KeySetBehaviour =
  | { kind: 'keys' }
  /** An HTTP status with a JSON error body. */
  | { kind: 'status'; status: number }
  /** 200 with a body that is not a key set. */
  | { kind: 'garbage' }
  /** Never answers (the request stays open until the server closes). */
  | { kind: 'stall' };

export interface KeySetServer {
  /** `http://127.0.0.1:<port>`, also the `issuer` of its discovery document unless told otherwise. */
  url: string;
  /** `${url}/jwks` */
  jwksUrl: string;
  /** Publishes exactly these keys from now on. */
  setKeys(keys: readonly TestKey[]): void;
  /** Changes what the key-set path answers. */
  setBehaviour(behaviour: KeySetBehaviour): void;
  /** The `issuer` the discovery document declares (default: `url`). */
  setDiscoveryIssuer(issuer: string): void;
  /** Requests received per path since the start. */
  requests(path: '/jwks' | '/.well-known/openid-configuration'): number;
  close(): Promise<void>;
}

/**
 * An issuer's key-set endpoint and discovery document on loopback port 0, whose answers the test
 * changes between requests. It counts requests, so tests can tell a fetch from a cache hit.
 */
export async function startKeySetServer(keys: readonly TestKey[] = []): Promise<KeySetServer> {
  let published = [...keys];
  let behaviour: KeySetBehaviour = { kind: 'keys' };
  let discoveryIssuer: string | undefined;
  const counts = new Map<string, number>();
  const server = http.createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const json = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (path === '/.well-known/openid-configuration') {
      json(200, { issuer: discoveryIssuer ?? url, jwks_uri: `${url}/jwks` });
      return;
    }
    if (path !== '/jwks') {
      json(404, { error: 'not_found' });
      return;
    }
    switch (behaviour.kind) {
      case 'keys':
        json(200, { keys: published.map((key) => key.publicJwk) });
        return;
      case 'status':
        json(behaviour.status, { error: 'unavailable' });
        return;
      case 'garbage':
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"keys": "not a list"');
        return;
      case 'stall':
        return;
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    jwksUrl: `${url}/jwks`,
    setKeys(next) {
      published = [...next];
    },
    setBehaviour(next) {
      behaviour = next;
    },
    setDiscoveryIssuer(issuer) {
      discoveryIssuer = issuer;
    },
    requests: (path) => counts.get(path) ?? 0,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A loopback URL where nothing listens: a port bound, then released. */
export async function unreachableUrl(): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
