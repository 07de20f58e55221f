// Where the dashboard's static files are: web/static at the package root, found from this module whether
// it runs from src/ (tests) or dist/src/ (the built command).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function staticDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [join(here, '..', '..', 'web', 'static'), join(here, '..', '..', '..', 'web', 'static')];
  const found = candidates.find((d) => existsSync(join(d, 'dashboard.js')));
  if (!found) throw new Error(`dashboard files not found (looked in ${candidates.join(', ')})`);
  return found;
}
