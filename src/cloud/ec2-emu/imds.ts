// One emulated instance's metadata service, IMDSv2 only, as EC2 serves it at 169.254.169.254: a session
// token from PUT /latest/api/token (header X-aws-ec2-metadata-token-ttl-seconds), then GETs that carry it
// (X-aws-ec2-metadata-token; 401 without). It serves the instance's identity, its user data and, once the
// emulator announces one, a spot interruption notice (spot/instance-action) or a rebalance recommendation
// (events/recommendations/rebalance); both are 404 until then, as on EC2.
import { randomBytes } from 'node:crypto';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeNow } from './util.js';

export interface ImdsIdentity {
  instanceId: string;
  instanceType: string;
  availabilityZone: string;
  lifecycle: 'spot' | 'on-demand';
  userData: string;
}

export class EmulatedImds {
  private server: Server | null = null;
  private readonly tokens = new Map<string, number>(); // token → expiry (ms)
  private spotAction: { action: string; time: string } | null = null;
  private rebalance: { noticeTime: string } | null = null;
  url = '';

  constructor(private readonly id: ImdsIdentity) {}

  /** Listens on host:0 (the address the instance reaches); returns the base URL. */
  async start(host: string): Promise<string> {
    this.server = http.createServer((req, res) => {
      const send = (status: number, body: string) => {
        res.writeHead(status, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      };
      const path = (req.url ?? '/').split('?')[0]!;
      if (req.method === 'PUT' && path === '/latest/api/token') {
        const ttl = Number(req.headers['x-aws-ec2-metadata-token-ttl-seconds']);
        if (!Number.isInteger(ttl) || ttl < 1 || ttl > 21600) return send(400, 'Bad Request');
        const token = randomBytes(24).toString('base64url');
        this.tokens.set(token, Date.now() + ttl * 1000);
        return send(200, token);
      }
      if (req.method !== 'GET') return send(405, 'Method Not Allowed');
      const token = req.headers['x-aws-ec2-metadata-token'];
      const expiry = typeof token === 'string' ? this.tokens.get(token) : undefined;
      if (expiry === undefined || expiry < Date.now()) return send(401, 'Unauthorized');
      const value = this.lookup(path);
      return value === null ? send(404, 'Not Found') : send(200, value);
    });
    await new Promise<void>((r) => this.server!.listen(0, host, r));
    this.url = `http://${host}:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  private lookup(path: string): string | null {
    const { id } = this;
    switch (path) {
      case '/latest/meta-data/instance-id':
        return id.instanceId;
      case '/latest/meta-data/instance-type':
        return id.instanceType;
      case '/latest/meta-data/placement/availability-zone':
        return id.availabilityZone;
      case '/latest/meta-data/instance-life-cycle':
        return id.lifecycle;
      case '/latest/user-data':
        return id.userData;
      case '/latest/meta-data/spot/instance-action':
        return this.spotAction ? JSON.stringify(this.spotAction) : null;
      case '/latest/meta-data/events/recommendations/rebalance':
        return this.rebalance ? JSON.stringify(this.rebalance) : null;
      default:
        return null;
    }
  }

  /** Announces that EC2 will reclaim the instance at `at` (spot/instance-action). */
  announceInterruption(at: Date, action: 'terminate' | 'stop' | 'hibernate' = 'terminate'): void {
    this.spotAction = { action, time: at.toISOString().replace(/\.\d+Z$/, 'Z') };
  }

  /** Announces an elevated risk of interruption (events/recommendations/rebalance). */
  recommendRebalance(at: Date): void {
    this.rebalance = { noticeTime: at.toISOString().replace(/\.\d+Z$/, 'Z') };
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = null;
    await closeNow(s);
  }
}
