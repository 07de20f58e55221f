// The emulated EC2's front: an HTTP proxy before moto_server that adds what moto lacks and what tests
// need (see faults.ts): latency, throttling and EC2 errors with their real statuses, lost responses,
// ClientToken idempotency (moto makes a second instance for a repeated token; EC2 returns the first) and
// account limits. Calls that carry the header x-berth-emu-internal (the emulator's own: the booter's
// polling) pass straight through. Under /_emu/ it serves its control API (JSON):
//   GET  /_emu/faults      the fault document in force and how often each rule fired
//   PUT  /_emu/faults      replaces it (400 naming the field when it is invalid)
//   GET  /_emu/calls       calls received per action, with their outcomes
//   …and the routes the emulator adds (spot interruptions, booted instances: emulator.ts).
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DescribeInstanceTypesCommand, type EC2Client } from '@aws-sdk/client-ec2';
import { systemClock, type Clock } from '../../model/clock.js';
import { quotaGroup } from '../ec2/quota-groups.js';
import {
  error,
  errorXml,
  FaultConfigError,
  Faults,
  NO_FAULTS,
  parseFaultConfig,
  type EmuFaultConfig,
  type FaultDecision,
} from './faults.js';
import { closeNow, liveInstances } from './util.js';

export const INTERNAL_HEADER = 'x-berth-emu-internal';

/** A control route the emulator adds: answers JSON, or throws a FaultConfigError for a 400. */
export type ControlRoute = (body: unknown) => Promise<unknown>;

export interface ProxyOptions {
  motoUrl: string;
  /** A client of moto itself (no faults), for the limits' instance counts. */
  moto: EC2Client;
  faults?: EmuFaultConfig;
  clock?: Clock;
  /** Extra control routes, keyed "METHOD /_emu/path". */
  routes?: Record<string, ControlRoute>;
}

interface Stored {
  fingerprint: string;
  answer: Promise<{ status: number; headers: http.OutgoingHttpHeaders; body: Buffer }>;
}

export class Ec2Proxy {
  private server: Server | null = null;
  private faults: Faults;
  private faultDoc: unknown;
  private readonly clock: Clock;
  private readonly tokens = new Map<string, Stored>();
  private readonly calls = new Map<string, Map<string, number>>();
  private readonly vcpus = new Map<string, number>();
  /** RunInstances under account limits run one at a time, so that two cannot both take the last slot. */
  private limitsQueue: Promise<unknown> = Promise.resolve();
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  url = '';

  constructor(private readonly o: ProxyOptions) {
    this.clock = o.clock ?? systemClock;
    this.faults = new Faults(o.faults ?? NO_FAULTS);
    this.faultDoc = {};
  }

  async start(host = '127.0.0.1'): Promise<string> {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: Error) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`emulator proxy: ${err.message}`);
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, host, r));
    this.url = `http://${host}:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = null;
    await closeNow(s);
    this.agent.destroy();
  }

  /** Replaces the fault document (also PUT /_emu/faults); the call counts start again from zero. */
  setFaults(doc: unknown): EmuFaultConfig {
    const cfg = parseFaultConfig(doc);
    this.faults = new Faults(cfg);
    this.faultDoc = doc;
    this.calls.clear();
    return cfg;
  }

  /**
   * Calls received per action since the fault document was set, by outcome: "ok", an EC2 error code,
   * "lost-response", "replayed" (a repeated ClientToken answered with the first instance).
   */
  callCounts(): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (const [a, m] of this.calls) out[a] = Object.fromEntries(m);
    return out;
  }

  private count(action: string, outcome: string): void {
    const m = this.calls.get(action) ?? this.calls.set(action, new Map()).get(action)!;
    m.set(outcome, (m.get(outcome) ?? 0) + 1);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    const path = (req.url ?? '/').split('?')[0]!;
    if (path.startsWith('/_emu/')) return this.control(req.method ?? 'GET', path, body, res);
    if (req.headers[INTERNAL_HEADER]) return this.pipe(await this.forward(req, body), res);

    const params = new URLSearchParams(body.toString('utf8'));
    const action = params.get('Action') ?? 'unknown';
    const latency = this.faults.latency();
    if (latency > 0) await new Promise((r) => setTimeout(r, latency));
    const token = action === 'RunInstances' ? params.get('ClientToken') : null;
    const replay = token !== null && (await this.madeInstance(token));
    const decision = this.faults.decide(action, params, this.clock.now().getTime(), replay);
    if (decision.kind === 'error') return this.fail(action, decision, res);

    let answer: { status: number; headers: http.OutgoingHttpHeaders; body: Buffer };
    if (token) {
      const fingerprint = [...params]
        .filter(([k]) => k !== 'ClientToken')
        .sort()
        .join('&');
      const stored = this.tokens.get(token);
      if (stored && stored.fingerprint !== fingerprint)
        return this.fail(
          action,
          error(
            'IdempotentParameterMismatch',
            `Arguments on this idempotent request are inconsistent with arguments used in previous request(s) with the same client token ${token}.`,
          ),
          res,
        );
      if (stored) {
        answer = await stored.answer;
        // Only a successful create is remembered: a refused one may be tried again with the same token.
        if (answer.status !== 200) this.tokens.delete(token);
        else this.count(action, 'replayed');
      } else {
        const p = this.run(action, params, req, body);
        this.tokens.set(token, { fingerprint, answer: p });
        answer = await p;
        if (answer.status !== 200) this.tokens.delete(token);
      }
    } else answer = await this.run(action, params, req, body);

    if (decision.kind === 'lost-response') {
      this.count(action, 'lost-response');
      // The call took effect; its caller never hears of it.
      req.socket.destroy();
      return;
    }
    this.count(
      action,
      answer.status === 200
        ? 'ok'
        : (/<Code>([^<]+)<\/Code>/.exec(answer.body.toString())?.[1] ?? `http-${answer.status}`),
    );
    this.pipe(answer, res);
  }

  /** Whether a RunInstances with this ClientToken made an instance (waits for one in flight). */
  private async madeInstance(token: string): Promise<boolean> {
    const stored = this.tokens.get(token);
    return (
      stored !== undefined &&
      (await stored.answer.then(
        (a) => a.status === 200,
        () => false,
      ))
    );
  }

  /** Forwards a call to moto, after the account limits for RunInstances. */
  private async run(
    action: string,
    params: URLSearchParams,
    req: IncomingMessage,
    body: Buffer,
  ): Promise<{ status: number; headers: http.OutgoingHttpHeaders; body: Buffer }> {
    const limits = this.faults.config.limits;
    const limited =
      action === 'RunInstances' &&
      (limits.maxInstances !== null ||
        limits.maxSpotInstances !== null ||
        Object.keys(limits.maxVcpus).length > 0);
    if (!limited) return this.forward(req, body);
    const turn = this.limitsQueue.then(async () => {
      const refusal = await this.overLimit(params);
      if (refusal && refusal.kind === 'error')
        return {
          status: refusal.status,
          headers: { 'content-type': 'text/xml' },
          body: Buffer.from(errorXml(refusal.code, refusal.message, randomUUID())),
        };
      return this.forward(req, body);
    });
    this.limitsQueue = turn.catch(() => {});
    return turn;
  }

  /** The account-limit error RunInstances would get, or null. */
  private async overLimit(params: URLSearchParams): Promise<FaultDecision | null> {
    const { limits } = this.faults.config;
    const want = Number(params.get('MinCount') ?? '1');
    const type = params.get('InstanceType') ?? 'm1.small';
    const spot = params.get('InstanceMarketOptions.MarketType') === 'spot';
    const live = (await liveInstances(this.o.moto)).map((i) => ({
      type: i.InstanceType ?? '',
      spot: i.InstanceLifecycle === 'spot',
    }));
    if (limits.maxInstances !== null && live.length + want > limits.maxInstances)
      return error(
        'InstanceLimitExceeded',
        `Your quota allows for ${Math.max(0, limits.maxInstances - live.length)} more running instance(s). You requested at least ${want}.`,
      );
    if (
      spot &&
      limits.maxSpotInstances !== null &&
      live.filter((i) => i.spot).length + want > limits.maxSpotInstances
    )
      return error('MaxSpotInstanceCountExceeded', 'Max spot instance count exceeded');
    const group = quotaGroup(type, spot);
    const cap = limits.maxVcpus[group];
    if (cap !== undefined) {
      let used = 0;
      for (const i of live) if (quotaGroup(i.type, i.spot) === group) used += await this.vcpusOf(i.type);
      if (used + want * (await this.vcpusOf(type)) > cap)
        return error(
          'VcpuLimitExceeded',
          `You have requested more vCPU capacity than your current vCPU limit of ${cap} allows for the instance bucket that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.`,
        );
    }
    return null;
  }

  private async vcpusOf(type: string): Promise<number> {
    let n = this.vcpus.get(type);
    if (n === undefined) {
      const r = await this.o.moto.send(new DescribeInstanceTypesCommand({ InstanceTypes: [type as never] }));
      n = r.InstanceTypes?.[0]?.VCpuInfo?.DefaultVCpus ?? 1;
      this.vcpus.set(type, n);
    }
    return n;
  }

  private forward(
    req: IncomingMessage,
    body: Buffer,
  ): Promise<{ status: number; headers: http.OutgoingHttpHeaders; body: Buffer }> {
    const target = new URL(req.url ?? '/', this.o.motoUrl);
    return new Promise((resolve, reject) => {
      const up = http.request(
        target,
        {
          method: req.method,
          agent: this.agent,
          headers: { ...req.headers, host: target.host, 'content-length': String(body.length) },
        },
        (r) => {
          void readBody(r).then((b) => {
            const headers = { ...r.headers };
            delete headers['transfer-encoding'];
            delete headers['connection'];
            resolve({ status: r.statusCode ?? 502, headers, body: b });
          }, reject);
        },
      );
      up.on('error', reject);
      up.end(body);
    });
  }

  private pipe(
    answer: { status: number; headers: http.OutgoingHttpHeaders; body: Buffer },
    res: ServerResponse,
  ): void {
    res.writeHead(answer.status, { ...answer.headers, 'content-length': String(answer.body.length) });
    res.end(answer.body);
  }

  private fail(action: string, d: Extract<FaultDecision, { kind: 'error' }>, res: ServerResponse): void {
    this.count(action, d.code);
    const body = errorXml(d.code, d.message, randomUUID());
    res.writeHead(d.status, {
      'content-type': 'text/xml;charset=UTF-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  }

  private async control(method: string, path: string, body: Buffer, res: ServerResponse): Promise<void> {
    const send = (status: number, value: unknown) => {
      const text = JSON.stringify(value);
      res.writeHead(status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(text),
      });
      res.end(text);
    };
    let input: unknown = null;
    if (body.length > 0) {
      try {
        input = JSON.parse(body.toString('utf8'));
      } catch {
        return send(400, { error: 'expected a JSON body' });
      }
    }
    try {
      const key = `${method} ${path}`;
      if (key === 'GET /_emu/faults')
        return send(200, { faults: this.faultDoc, fired: this.faults.firedCounts() });
      if (key === 'PUT /_emu/faults') {
        this.setFaults(input ?? {});
        return send(200, { faults: this.faultDoc });
      }
      if (key === 'GET /_emu/calls') return send(200, { calls: this.callCounts() });
      const route = this.o.routes?.[key];
      if (!route) return send(404, { error: `no control route ${key}` });
      return send(200, await route(input));
    } catch (err) {
      if (err instanceof FaultConfigError) return send(400, { error: err.message });
      throw err;
    }
  }
}

function readBody(s: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('end', () => resolve(Buffer.concat(chunks)));
    s.on('error', reject);
  });
}
