// The agent's node token, kept in its work dir (mode 0600) so that a restarted agent does not need the
// bootstrap secret, which registration used up.
import { open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';

export interface NodeCredentials {
  node_id: string;
  token: string;
}

export const CREDENTIALS_FILE = 'node-token.json';

export async function readCredentials(workDir: string, nodeId: string): Promise<NodeCredentials | null> {
  let text: string;
  try {
    text = await readFile(join(workDir, CREDENTIALS_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const c = JSON.parse(text) as NodeCredentials;
  return c.node_id === nodeId && typeof c.token === 'string' ? c : null;
}

export async function writeCredentials(workDir: string, c: NodeCredentials): Promise<void> {
  const path = join(workDir, CREDENTIALS_FILE);
  const tmp = `${path}.${process.pid}.tmp`;
  const fh = await open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(JSON.stringify(c));
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}
