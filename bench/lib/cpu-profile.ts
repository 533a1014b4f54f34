/**
 * Reading a V8 CPU profile (`node --cpu-prof`) of a facade: the samples taken inside a window (on
 * the monotonic clock `process.hrtime` reads, the clock of the profile's timestamps on Linux),
 * charged to steps by the file of the function that ran, and given in microseconds per unit of
 * work (an operation, a delivery) from the process's CPU per unit (/proc). `bench/profile.ts`
 * (per operation) and `bench/fanout.ts` (per delivery) use it.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
/** A `.cpuprofile` file as V8 writes it. */
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The steps of the work, by where the code is: the first pattern that matches a function's file names its step. */
export type ProfileSteps = readonly (readonly [step: string, pattern: RegExp])[];

/** What one summary covers. */
export interface ProfileSummaryInput {
  /** The heading of the section. */
  name: string;
  profile: CpuProfile;
  /** The window of the work, in microseconds on the monotonic clock. */
  window: [number, number];
  /** The process's CPU per unit of work, from /proc. */
  cpuMsPerUnit: number;
  /** Units of work done in the window, and what one is called (`operation`, `delivery`). */
  units: number;
  unit: string;
  steps: ProfileSteps;
  /**
   * Native functions (no file of their own) charged to a step of their own by their name
   * (`stringify`: serialisation), instead of to their nearest caller's file.
   */
  nativeSteps?: Readonly<Record<string, string>>;
}

/** The monotonic clock in microseconds, the clock of a V8 CPU profile's timestamps on Linux. */
export function microsecondsNow(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** The module a file belongs to: a package name, a source file, or Node's own file. */
function moduleOf(url: string): string {
  const packageMatch = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (packageMatch) return packageMatch[1]!;
  const source = url.indexOf('/src/');
  if (source >= 0 && !url.includes('node_modules')) return url.slice(source + 1);
  if (url.startsWith('node:')) return url;
  return url === '' ? '' : url.replace(/^file:\/\//, '');
}

function stepOf(steps: ProfileSteps, url: string): string {
  for (const [step, pattern] of steps) if (pattern.test(url)) return step;
  return 'other';
}

/** Samples of one summary, by step (self and total), module and function. */
interface Tally {
  self: Map<string, number>;
  total: Map<string, number>;
  modules: Map<string, number>;
  functions: Map<string, number>;
  busy: number;
  inWindow: number;
}

function tally({ profile, window, steps, nativeSteps = {} }: ProfileSummaryInput): Tally {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  // The file a node's time is charged to: its own, or its nearest caller's with one.
  const chargedUrl = new Map<number, string>();
  const urlOf = (id: number): string => {
    const known = chargedUrl.get(id);
    if (known !== undefined) return known;
    const node = byId.get(id)!;
    const up = parent.get(id);
    const url = node.callFrame.url !== '' || up === undefined ? node.callFrame.url : urlOf(up);
    chargedUrl.set(id, url);
    return url;
  };
  const add = (map: Map<string, number>, key: string): void => void map.set(key, (map.get(key) ?? 0) + 1);

  const result: Tally = {
    self: new Map(),
    total: new Map(),
    modules: new Map(),
    functions: new Map(),
    busy: 0,
    inWindow: 0,
  };
  let time = profile.startTime;
  for (let index = 0; index < profile.samples.length; index += 1) {
    time += profile.timeDeltas[index]!;
    if (time < window[0] || time > window[1]) continue;
    result.inWindow += 1;
    const id = profile.samples[index]!;
    const node = byId.get(id)!;
    const frame = node.callFrame.functionName;
    if (frame === '(idle)') continue;
    result.busy += 1;
    const native = node.callFrame.url === '' ? nativeSteps[frame] : undefined;
    let step: string;
    if (frame === '(garbage collector)') step = 'garbage collection';
    else if (frame === '(program)') step = 'V8 and Node outside JavaScript (program)';
    else step = native ?? stepOf(steps, urlOf(id));
    add(result.self, step);
    add(result.modules, frame.startsWith('(') ? frame : moduleOf(urlOf(id)) || '(native)');
    add(result.functions, `${frame || '(anonymous)'} ${moduleOf(node.callFrame.url) || '(native)'}`);
    // Total: each step on the stack once.
    const seen = new Set<string>([step]);
    for (let up = parent.get(id); up !== undefined; up = parent.get(up)) {
      const upFrame = byId.get(up)!.callFrame;
      if (upFrame.functionName === '(root)') break;
      if (upFrame.url !== '') seen.add(stepOf(steps, upFrame.url));
    }
    for (const each of seen) add(result.total, each);
  }
  return result;
}

/**
 * A markdown section: the CPU of each step in microseconds per unit (self and total), then the
 * modules and functions with the most self time.
 */
export function summariseProfile(input: ProfileSummaryInput): string {
  const { name, cpuMsPerUnit, units, unit } = input;
  const { self, total, modules, functions, busy, inWindow } = tally(input);
  if (inWindow === 0) throw new Error(`${name}: no sample fell in the window (clock mismatch?)`);
  const microsPerSample = (cpuMsPerUnit * 1000) / Math.max(1, busy);
  const us = (samples: number) => (samples * microsPerSample).toFixed(1);
  const pct = (samples: number) => `${((samples / busy) * 100).toFixed(1)} %`;
  const top = (map: Map<string, number>, count: number) =>
    [...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, count);

  const lines = [
    `## ${name}`,
    '',
    `${units} ${unit}s; ${(cpuMsPerUnit * 1000).toFixed(1)} µs of CPU per ${unit} (/proc); ` +
      `${busy} busy samples of ${inWindow} in the window.`,
    '',
    `| step | self µs / ${unit} | self share | total µs / ${unit} | total share |`,
    '|---|---:|---:|---:|---:|',
  ];
  for (const [step, samples] of top(self, 50)) {
    const all = total.get(step) ?? samples;
    lines.push(`| ${step} | ${us(samples)} | ${pct(samples)} | ${us(all)} | ${pct(all)} |`);
  }
  lines.push('', `| module (self) | µs / ${unit} | share |`, '|---|---:|---:|');
  for (const [module, samples] of top(modules, 25))
    lines.push(`| ${module} | ${us(samples)} | ${pct(samples)} |`);
  lines.push('', `| function (self) | µs / ${unit} | share |`, '|---|---:|---:|');
  for (const [fn, samples] of top(functions, 30)) lines.push(`| ${fn} | ${us(samples)} | ${pct(samples)} |`);
  lines.push('');
  return lines.join('\n');
}
