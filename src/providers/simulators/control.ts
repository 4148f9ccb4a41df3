// A simulator's control side: what a test or a benchmark reads (the pushes received, counters) and
// steers (failure rules, latency), in-process through RunningSimulator or over HTTPS at /__sim/ from
// another process.
import type { Answer, FailureRule, Latency, RunningSimulator, SimulatorCounters, SimulatorOptions, SimulatorState } from './common.ts';

/** What a simulator keeps between requests: the provider side writes it, the control side reads and steers it. */
export type Recording<Received> = {
  state: SimulatorState;
  received: Received[];
  counters: SimulatorCounters;
  /** Push requests being handled now. */
  inFlight: number;
  /** false: counters only. */
  keep: boolean;
  limit: number;
};

export function createRecording<Received>(options: SimulatorOptions): Recording<Received> {
  return {
    state: { rules: [...(options.rules ?? [])], latency: options.latency },
    received: [],
    counters: { requests: 0, byStatus: {}, sessions: 0, openSessions: 0, connections: 0, unrecorded: 0, maxInFlight: 0 },
    inFlight: 0,
    keep: options.record !== false,
    limit: options.recordLimit ?? 100_000,
  };
}

function clear(recording: Recording<unknown>): void {
  recording.received.length = 0;
  recording.counters.requests = 0;
  recording.counters.byStatus = {};
  recording.counters.unrecorded = 0;
  recording.counters.maxInFlight = recording.inFlight;
}

/** The control side for code in the simulator's own process. */
export function inProcessControls<Received>(
  recording: Recording<Received>,
): Pick<RunningSimulator<Received>, 'received' | 'counters' | 'setRules' | 'setLatency' | 'clear'> {
  return {
    received: recording.received,
    counters: recording.counters,
    setRules: (rules) => {
      recording.state.rules = [...rules];
    },
    setLatency: (latency) => {
      recording.state.latency = latency;
    },
    clear: () => clear(recording),
  };
}

/** The answer to a request to /__sim/…: the control side for another process. */
export function answerControl(path: string, method: string, body: Buffer, recording: Recording<unknown>, resetSessions: () => number): Answer {
  if (path === '/__sim/received' && method === 'GET') {
    return { status: 200, body: { counters: recording.counters, received: recording.received } };
  }
  if (path === '/__sim/received' && method === 'DELETE') {
    clear(recording);
    return { status: 204 };
  }
  if (path === '/__sim/connections' && method === 'DELETE') {
    return { status: 200, body: { unanswered: resetSessions() } };
  }
  if (path === '/__sim/rules' && method === 'PUT') {
    const parsed = parseControlBody(body);
    if (typeof parsed === 'string') return { status: 400, body: { error: parsed } };
    if (parsed.rules) recording.state.rules = parsed.rules;
    if (parsed.latency !== undefined) recording.state.latency = parsed.latency ?? undefined;
    return { status: 204 };
  }
  return { status: 404, body: { error: 'unknown control endpoint' } };
}

function parseControlBody(body: Buffer): { rules?: FailureRule[]; latency?: Latency | null } | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return 'the body must be JSON: {"rules": [...], "latency": ms | {"min", "max"} | null}';
  }
  const value = Array.isArray(parsed) ? { rules: parsed } : parsed;
  if (typeof value !== 'object' || value === null) return 'the body must be an object or an array of rules';
  const { rules, latency } = value as { rules?: unknown; latency?: unknown };
  if (rules !== undefined && !(Array.isArray(rules) && rules.every(isRule))) {
    return 'rules must be an array of {reason, prefix?, rate?, status?, retryAfter?, timestamp?, message?}';
  }
  if (latency !== undefined && latency !== null && !isLatency(latency)) {
    return 'latency must be a number of milliseconds or {min, max}';
  }
  return { rules: rules as FailureRule[] | undefined, latency: latency as Latency | null | undefined };
}

function isRule(value: unknown): value is FailureRule {
  if (typeof value !== 'object' || value === null) return false;
  const rule = value as Record<string, unknown>;
  const optional = (key: string, type: 'string' | 'number') => rule[key] === undefined || typeof rule[key] === type;
  return (
    typeof rule.reason === 'string' &&
    optional('prefix', 'string') &&
    optional('rate', 'number') &&
    optional('status', 'number') &&
    optional('retryAfter', 'number') &&
    optional('timestamp', 'number') &&
    optional('message', 'string')
  );
}

function isLatency(value: unknown): value is Latency {
  if (typeof value === 'number') return value >= 0;
  if (typeof value !== 'object' || value === null) return false;
  const { min, max } = value as { min?: unknown; max?: unknown };
  return typeof min === 'number' && typeof max === 'number' && min >= 0 && max >= min;
}
