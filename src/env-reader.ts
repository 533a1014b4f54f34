/**
 * Reads environment variables for a configuration, collecting problems instead of throwing at the
 * first one, so an operator fixes them all in one go. Messages name the variable and what is wrong;
 * a caller reading a secret must not use these methods, which quote the value.
 */

/** The environment, e.g. `process.env`. */
export type Env = Readonly<Record<string, string | undefined>>;

/** Receives one problem of one variable. */
export type ReportProblem = (name: string, problem: string) => void;

export class EnvReader {
  /** Every problem so far, as `NAME: problem`. */
  readonly problems: string[] = [];
  readonly #env: Env;
  readonly #onProblem: ReportProblem | undefined;

  /** `onProblem` also receives every problem (e.g. to collect them with another reader's). */
  constructor(env: Env, onProblem?: ReportProblem) {
    this.#env = env;
    this.#onProblem = onProblem;
  }

  report(name: string, problem: string): void {
    this.problems.push(`${name}: ${problem}`);
    this.#onProblem?.(name, problem);
  }

  /** The value exactly as set (for secrets, which are validated but never trimmed or quoted). */
  verbatim(name: string): string | undefined {
    return this.#env[name];
  }

  /** The trimmed value, or undefined when unset or blank (a blank variable means "use the default"). */
  trimmed(name: string): string | undefined {
    const value = this.#env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  }

  /**
   * An absolute http(s) URL without credentials; undefined when unset or invalid. An unparsable
   * value is quoted without any `user:password@` it holds.
   *
   * @param refuseQueryAndFragment also refuse a query or a fragment (an origin to append paths to).
   */
  httpUrl(name: string, { refuseQueryAndFragment = false } = {}): URL | undefined {
    const value = this.trimmed(name);
    if (value === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      const shown = value.replace(/\/\/[^/]*@/, '//[redacted]@');
      this.report(name, `must be an absolute http(s) URL, got ${JSON.stringify(shown)}`);
      return undefined;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      this.report(name, `must use http or https, got ${JSON.stringify(url.protocol)}`);
      return undefined;
    }
    const credentials = url.username !== '' || url.password !== '';
    if (refuseQueryAndFragment) {
      if (credentials || url.search !== '' || url.hash !== '') {
        // Credentials in a URL end up in logs; keys belong in their own variables.
        this.report(name, 'must not contain credentials, a query or a fragment');
        return undefined;
      }
    } else if (credentials) {
      this.report(name, 'must not contain credentials');
      return undefined;
    }
    return url;
  }

  string(name: string, fallback: string): string {
    return this.trimmed(name) ?? fallback;
  }

  /** A decimal integer from `min` to `max`; `fallback` when unset or invalid. */
  integer(name: string, fallback: number, min: number, max: number): number {
    const raw = this.trimmed(name);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      this.report(name, `must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
      return fallback;
    }
    return Number(raw);
  }

  /** `true`/`1` or `false`/`0`, any case; `fallback` when unset or invalid. */
  boolean(name: string, fallback: boolean): boolean {
    return this.optionalBoolean(name) ?? fallback;
  }

  /** Like {@link boolean}, but undefined when unset or invalid, for defaults decided later. */
  optionalBoolean(name: string): boolean | undefined {
    const raw = this.trimmed(name);
    if (raw === undefined) return undefined;
    const lower = raw.toLowerCase();
    if (lower === 'true' || lower === '1') return true;
    if (lower === 'false' || lower === '0') return false;
    this.report(name, `must be true or false, got ${JSON.stringify(raw)}`);
    return undefined;
  }

  /** One of `allowed`, exactly; `fallback` when unset or invalid. */
  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: NoInfer<T>): T {
    const raw = this.trimmed(name);
    if (raw === undefined) return fallback;
    if (!(allowed as readonly string[]).includes(raw)) {
      this.report(name, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`);
      return fallback;
    }
    return raw as T;
  }
}
