/**
 * Vitest global setup: one real OpenID provider (dev-issuer/, oidc-provider) for the whole run, with
 * the clients the tests act as. Tests read its coordinates with `inject('issuer')` and get real
 * signed access tokens from its token endpoint (see `test/support/tokens.ts`).
 */
import type { TestProject } from 'vitest/node';
import type { JWK } from 'jose';
import { generateSigningKey, startDevIssuer } from '../../dev-issuer/index.ts';
import { TEST_CLIENTS } from './test-clients.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's issuer: `iss`, the token endpoint, the audience and resource of the facade. */
    issuer: {
      issuer: string;
      tokenUrl: string;
      jwksUrl: string;
      audience: string;
      resource: string;
      /** The run's signing key, generated at its start: tests sign tokens the issuer would never hand out. */
      signingKey: JWK;
    };
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Generated for this run like the demo issuer's own, and kept in memory only.
  const signingKey = await generateSigningKey();
  const issuer = await startDevIssuer({ clients: Object.values(TEST_CLIENTS), signingKey });
  project.provide('issuer', {
    issuer: issuer.issuer,
    tokenUrl: issuer.tokenUrl,
    jwksUrl: issuer.jwksUrl,
    audience: issuer.audience,
    resource: issuer.resource,
    signingKey,
  });
  return () => issuer.close();
}
