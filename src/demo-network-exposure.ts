/**
 * Whether `npm start` may run its demo authentication (the in-process OpenID provider, whose demo
 * clients' secrets are printed and documented) on the address the facade listens on. On loopback
 * only the person at the machine reaches it; beyond loopback the facade, its demo data and its demo
 * callers are a network service, which needs an explicit `DEMO_ALLOW_NETWORK=true`.
 */

/** The setting that lets the demo be reached from the network. */
export const DEMO_ALLOW_NETWORK = 'DEMO_ALLOW_NETWORK';

/** What `npm start` does with the embedded issuer on `host`. */
export type DemoExposure =
  { kind: 'loopback' } | { kind: 'refused'; message: string } | { kind: 'allowed'; warning: string };

/** True for names and addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const bare = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  if (bare === 'localhost' || bare.endsWith('.localhost')) return true;
  if (bare === '::1' || bare === '0:0:0:0:0:0:0:1') return true;
  const v4 = bare.replace(/^::ffff:/, '');
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** Decides, from the facade's listen address and the environment, whether the demo may start. */
export function demoExposure(host: string, env: Readonly<Record<string, string | undefined>>): DemoExposure {
  if (isLoopbackHost(host)) return { kind: 'loopback' };
  const allowed = env[DEMO_ALLOW_NETWORK]?.trim().toLowerCase() === 'true';
  if (!allowed) {
    return {
      kind: 'refused',
      message:
        `Refusing to start: HOST=${host} listens beyond loopback, and with no AUTH_ISSUER the facade ` +
        'would trust the in-process demo OpenID provider, whose demo clients are documented. ' +
        'Set AUTH_ISSUER (and AUTH_AUDIENCE) to your identity provider, listen on loopback ' +
        `(HOST=127.0.0.1), or set ${DEMO_ALLOW_NETWORK}=true to let the network reach the demo.`,
    };
  }
  return {
    kind: 'allowed',
    warning:
      `${DEMO_ALLOW_NETWORK}=true: the demo facade, its demo data and its demo callers listen on ` +
      `${host}, reachable from the network; its OpenID provider stays on this machine's loopback`,
  };
}
