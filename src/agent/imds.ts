// The instance metadata service (IMDSv2) as the agent uses it on a cloud instance: a session token (PUT
// /latest/api/token), then GETs with it. The agent reads its instance id (reported at registration) and
// polls for a spot interruption notice (spot/instance-action) and a rebalance recommendation
// (events/recommendations/rebalance); both answer 404 until EC2 issues one.
import http from 'node:http';
import { text } from 'node:stream/consumers';

/** EC2 will stop, hibernate or terminate the instance at `time` (about two minutes after the notice). */
export interface SpotAction {
  action: string;
  time: Date;
}

const TOKEN_TTL_S = 21600;

export class ImdsClient {
  private token: { value: string; until: number } | null = null;

  constructor(
    readonly baseUrl: string,
    private readonly timeoutMs = 2000,
  ) {}

  /** The value at `path` (e.g. /latest/meta-data/instance-id), or null when the service answers 404. */
  async get(path: string): Promise<string | null> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const token = await this.sessionToken();
      const r = await this.request('GET', path, { 'x-aws-ec2-metadata-token': token });
      if (r.status === 200) return r.body;
      if (r.status === 404) return null;
      if (r.status === 401) {
        this.token = null; // expired or unknown: get a new one once
        continue;
      }
      throw new Error(`IMDS ${path}: HTTP ${r.status}`);
    }
    throw new Error(`IMDS ${path}: token refused`);
  }

  async instanceId(): Promise<string> {
    const id = await this.get('/latest/meta-data/instance-id');
    if (!id) throw new Error('IMDS has no instance-id');
    return id.trim();
  }

  /** The spot interruption notice, or null. */
  async spotAction(): Promise<SpotAction | null> {
    const v = await this.get('/latest/meta-data/spot/instance-action');
    if (!v) return null;
    const j = JSON.parse(v) as { action?: string; time?: string };
    return { action: j.action ?? 'terminate', time: new Date(j.time ?? Date.now()) };
  }

  /** When EC2 recommended moving work off this instance (elevated interruption risk), or null. */
  async rebalanceRecommendation(): Promise<Date | null> {
    const v = await this.get('/latest/meta-data/events/recommendations/rebalance');
    if (!v) return null;
    const j = JSON.parse(v) as { noticeTime?: string };
    return new Date(j.noticeTime ?? Date.now());
  }

  private async sessionToken(): Promise<string> {
    if (this.token && this.token.until > Date.now()) return this.token.value;
    const r = await this.request('PUT', '/latest/api/token', {
      'x-aws-ec2-metadata-token-ttl-seconds': String(TOKEN_TTL_S),
    });
    if (r.status !== 200) throw new Error(`IMDS token: HTTP ${r.status}`);
    // Renewed well before it expires.
    this.token = { value: r.body.trim(), until: Date.now() + (TOKEN_TTL_S / 2) * 1000 };
    return this.token.value;
  }

  private request(method: string, path: string, headers: Record<string, string>) {
    return new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        new URL(path, this.baseUrl),
        {
          method,
          headers: { ...headers, 'content-length': '0' },
          signal: AbortSignal.timeout(this.timeoutMs),
        },
        (res) => {
          text(res).then((body) => resolve({ status: res.statusCode ?? 0, body }), reject);
        },
      );
      req.on('error', reject);
      req.end();
    });
  }
}
