// Small pieces the emulator's parts share.
import type { Server } from 'node:http';
import { DescribeInstancesCommand, type EC2Client, type Instance } from '@aws-sdk/client-ec2';

/** Every pending or running instance of the emulated EC2 (all pages). */
export async function liveInstances(ec2: EC2Client): Promise<Instance[]> {
  const out: Instance[] = [];
  let NextToken: string | undefined;
  do {
    const page = await ec2.send(
      new DescribeInstancesCommand({
        Filters: [{ Name: 'instance-state-name', Values: ['pending', 'running'] }],
        NextToken,
      }),
    );
    for (const r of page.Reservations ?? []) out.push(...(r.Instances ?? []));
    NextToken = page.NextToken || undefined;
  } while (NextToken);
  return out;
}

/** Closes a server now: open connections (keep-alive, calls in flight) are cut, not waited for. */
export async function closeNow(server: Server | null): Promise<void> {
  if (!server) return;
  const closed = new Promise<void>((r) => server.close(() => r()));
  server.closeAllConnections();
  await closed;
}
