/**
 * Fails a test that writes to `console.error` or `console.warn` unless the line is one the suite
 * expects, each listed here with why. The facade logs through its own logger; a console line
 * during a test is a library or a test complaining about something nobody asserted, which would
 * otherwise scroll past in a green run.
 */
import { afterAll, afterEach, vi } from 'vitest';

interface ExpectedLine {
  /** Why the line is printed and why it is fine. */
  reason: string;
  matches(args: readonly unknown[]): boolean;
}

const EXPECTED: readonly ExpectedLine[] = [
  {
    reason:
      "graphql-ws's ws adapter prints this for every socket error, and ws raises one when a client " +
      'sends a message over GRAPHQL_WS_MAX_PAYLOAD_BYTES; the socket is closed with 1009, which the ' +
      'tests assert (docs/security.md)',
    matches: ([message, error]) =>
      message === 'Internal error emitted on a WebSocket socket. Please check your implementation.' &&
      error instanceof RangeError &&
      error.message.includes('Max payload size exceeded'),
  },
  {
    reason:
      "Apollo Client 4's development build prints this when a multipart subscription ends with the " +
      "protocol's transport error (`payload: null` with errors, as an expired token or a refused " +
      'subscription ends at a gateway): the result it hands its cache has no data; the tests assert ' +
      'the error the subscription reports',
    matches: ([message]) => message === "Missing field '%s' while writing result %o",
  },
];

const unexpected: string[] = [];

for (const method of ['error', 'warn'] as const) {
  const original = console[method].bind(console);
  vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
    if (EXPECTED.some((line) => line.matches(args))) return;
    unexpected.push(
      `console.${method}: ${args.map((arg) => (arg instanceof Error ? arg.stack : String(arg))).join(' ')}`,
    );
    // Still printed, so the failure shows what was said and where.
    original(...args);
  });
}

function failOnUnexpectedLines(): void {
  if (unexpected.length === 0) return;
  const lines = unexpected.splice(0);
  throw new Error(
    `Unexpected console output (add it to test/support/console-guard.ts with a reason if it is expected):\n${lines.join('\n')}`,
  );
}

afterEach(failOnUnexpectedLines);
// Servers closed in afterAll may still print; that output fails the file.
afterAll(failOnUnexpectedLines);
