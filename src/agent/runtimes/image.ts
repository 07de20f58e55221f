// What a container's `image` field names, and turning a root-filesystem tarball into a directory once.
//
//   null or ""                      no image: the process runtime, in the work dir
//   /path/to/rootfs.tar(.gz|.tgz)   a root filesystem: unpacked once into the cache (runc), imported (docker)
//   anything else                   an image name for docker/podman
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ImageNotFoundError } from './errors.js';

const run = promisify(execFile);

/** Default cache of unpacked root filesystems. */
export const IMAGE_CACHE = process.env.BERTH_IMAGE_CACHE ?? '/var/cache/berth/images';

/** What an image field refers to. */
export type ImageRef = { kind: 'none' } | { kind: 'tarball'; path: string } | { kind: 'name'; name: string };

export function classifyImage(image: string | null): ImageRef {
  if (image === null || image === '') return { kind: 'none' };
  if (image.startsWith('/') && /\.(tar|tar\.gz|tgz)$/.test(image)) return { kind: 'tarball', path: image };
  return { kind: 'name', name: image };
}

/** A stable key for a tarball's content: path, size and mtime (hashing gigabytes on every start is too slow). */
export async function tarballKey(path: string): Promise<string> {
  let st;
  try {
    st = await stat(path);
  } catch (err) {
    throw new ImageNotFoundError(path, `cannot read the root-filesystem tarball: ${(err as Error).message}`);
  }
  if (!st.isFile()) throw new ImageNotFoundError(path, 'not a regular file');
  return createHash('sha256').update(`${path}\0${st.size}\0${st.mtimeMs}`).digest('hex').slice(0, 32);
}

const unpacking = new Map<string, Promise<string>>();

/**
 * The unpacked root filesystem of a tarball: unpacked on first use into `cacheDir/<key>` (atomically, so a
 * crash mid-way leaves no half directory) and reused afterwards. Concurrent callers share one unpack.
 */
export async function ensureRootfs(path: string, cacheDir = IMAGE_CACHE): Promise<string> {
  const key = await tarballKey(path);
  const dest = join(cacheDir, key);
  const existing = unpacking.get(dest);
  if (existing) return existing;
  const p = (async () => {
    if (
      await stat(dest).then(
        () => true,
        () => false,
      )
    )
      return dest;
    await mkdir(cacheDir, { recursive: true });
    const tmp = await mkdtemp(join(cacheDir, `.unpack-${key}-`));
    try {
      await run('tar', ['-xf', path, '-C', tmp, '--numeric-owner'], { maxBuffer: 1 << 20 });
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw new ImageNotFoundError(
        path,
        `cannot unpack: ${((err as { stderr?: string }).stderr ?? '').trim() || (err as Error).message}`,
      );
    }
    await rename(tmp, dest).catch(async (err: NodeJS.ErrnoException) => {
      await rm(tmp, { recursive: true, force: true }); // another agent process won the race
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    });
    return dest;
  })();
  unpacking.set(dest, p);
  try {
    return await p;
  } finally {
    unpacking.delete(dest);
  }
}
