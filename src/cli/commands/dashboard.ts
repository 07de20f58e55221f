// `berth dashboard`: prints the dashboard's address and a link that signs in once (within 10 minutes) as
// the CLI's token, so nobody has to paste a token into a browser.
import type { Command } from 'commander';
import { clientFor } from '../client.js';

export function registerDashboard(program: Command): void {
  program
    .command('dashboard')
    .description('print a link that signs you in to the dashboard (once, within 10 minutes)')
    .action(async (_opts: unknown, cmd: Command) => {
      const client = clientFor(cmd);
      const link = await client.request<{ path: string; expires_at: string }>(
        'POST',
        '/v1/dashboard/signin-links',
        {},
      );
      console.log(`${client.baseUrl}${link.path}`);
      console.error(
        `berth: open it in a browser: it signs in once, until ${new Date(link.expires_at).toISOString()}; the dashboard is ${client.baseUrl}/dashboard`,
      );
    });
}
