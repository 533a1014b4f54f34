/**
 * Reads a Prometheus text exposition (`/metrics`) into series values, so tests can assert exact
 * counters: `series('facade_upstream_requests_total', { route: '/v3/customers/{customerId}' })`.
 */

/** Every sample of one scrape, keyed by `name{label="value",...}` with labels sorted by name. */
export type Scrape = ReadonlyMap<string, number>;

/** GETs `url` and parses the answer. Fails on a non-200 answer or a content type other than Prometheus text. */
export async function scrape(url: string): Promise<Scrape> {
  const response = await fetch(url);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${text.slice(0, 200)}`);
  if (!(response.headers.get('content-type') ?? '').startsWith('text/plain')) {
    throw new Error(`${url} answered with content type ${response.headers.get('content-type')}`);
  }
  return parseExposition(text);
}

/** Parses Prometheus text format 0.0.4 (the subset prom-client writes). */
export function parseExposition(text: string): Scrape {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null) throw new Error(`not a sample line: ${line}`);
    const [, name, labelText = '', value] = match;
    const labels: Record<string, string> = {};
    for (const label of labelText.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[label[1]!] = label[2]!.replace(/\\"/g, '"').replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
    }
    samples.set(seriesKey(name!, labels), Number(value));
  }
  return samples;
}

/** The key of one series in a {@link Scrape}. */
export function seriesKey(name: string, labels: Record<string, string> = {}): string {
  const parts = Object.keys(labels)
    .sort()
    .map((key) => `${key}=${JSON.stringify(labels[key])}`);
  return parts.length === 0 ? name : `${name}{${parts.join(',')}}`;
}

/** The value of a series, 0 when absent (a counter never incremented is not written). */
export function valueOf(samples: Scrape, name: string, labels: Record<string, string> = {}): number {
  return samples.get(seriesKey(name, labels)) ?? 0;
}

/**
 * The value of one series that must be there: throws when `name` (with `labels`) is absent, where
 * {@link valueOf} reads 0, so a renamed or relabelled series fails the test instead of passing it.
 */
export function requiredValueOf(samples: Scrape, name: string, labels: Record<string, string> = {}): number {
  const value = samples.get(seriesKey(name, labels));
  if (value === undefined) throw new Error(`no series ${seriesKey(name, labels)} in the scrape`);
  return value;
}

/** Every series of `name` whose labels include `match`, as `labels → value`. */
export function seriesOf(
  samples: Scrape,
  name: string,
  match: Record<string, string> = {},
): Record<string, number> {
  const found: Record<string, number> = {};
  for (const [key, value] of samples) {
    if (!(key === name || key.startsWith(`${name}{`))) continue;
    const labels = key.slice(name.length);
    if (
      Object.entries(match).every(([label, wanted]) => labels.includes(`${label}=${JSON.stringify(wanted)}`))
    ) {
      found[labels === '' ? '{}' : labels] = value;
    }
  }
  return found;
}

/** What changed between two scrapes of `name` (series whose value moved), as `labels → delta`. */
export function deltas(
  before: Scrape,
  after: Scrape,
  name: string,
  match: Record<string, string> = {},
): Record<string, number> {
  const earlier = seriesOf(before, name, match);
  const changed: Record<string, number> = {};
  for (const [labels, value] of Object.entries(seriesOf(after, name, match))) {
    const delta = value - (earlier[labels] ?? 0);
    if (delta !== 0) changed[labels] = delta;
  }
  return changed;
}
