import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import type { Config } from '../config';

/** Cache-Control of a stored image: its name is its content's hash, so it never changes. */
export const IMMUTABLE_CACHE_CONTROL = 'public, max-age=31536000, immutable';

/**
 * Where uploaded images' bytes live, by name `<sha256>.<ext>` (content-addressed: one name always holds the same
 * bytes, so storing a name again is harmless). Which rows reference a name is the service's business
 * (domain/uploads/upload.service.ts), not the storage's.
 */
export interface UploadStorage {
  readonly kind: 'local' | 's3';
  put(name: string, bytes: Buffer, contentType: string): Promise<void>;
  /** The stored bytes as a stream, or undefined when nothing is stored under the name. */
  open(name: string): Promise<Readable | undefined>;
  /** Removes the name; a name that is not stored is no error. */
  remove(name: string): Promise<void>;
}

/** Local disk: `<dir>/<first two hex digits>/<sha256>.<ext>` (256 folders keep any one folder small). */
class LocalDiskStorage implements UploadStorage {
  readonly kind = 'local';
  constructor(private readonly dir: string) {}

  private file(name: string): string {
    return path.join(this.dir, name.slice(0, 2), name);
  }

  async put(name: string, bytes: Buffer): Promise<void> {
    const file = this.file(name);
    if (await fs.stat(file).then((s) => s.size === bytes.length, () => false)) return;
    await fs.mkdir(path.dirname(file), { recursive: true });
    // Written aside and renamed: a reader never sees a half-written file, and two writers of one name both succeed.
    const tmp = `${file}.${randomUUID()}.tmp`;
    try {
      await fs.writeFile(tmp, bytes, { flag: 'wx' });
      await fs.rename(tmp, file);
    } catch (err) {
      await fs.rm(tmp, { force: true });
      throw err;
    }
  }

  async open(name: string): Promise<Readable | undefined> {
    try {
      const handle = await fs.open(this.file(name), 'r');
      return handle.createReadStream({ autoClose: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async remove(name: string): Promise<void> {
    await fs.rm(this.file(name), { force: true });
  }
}

/** S3 or an S3-compatible store: object `uploads/<sha256>.<ext>` in the bucket, with its type and an immutable Cache-Control. */
class S3Storage implements UploadStorage {
  readonly kind = 's3';
  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
  ) {}

  async put(name: string, bytes: Buffer, contentType: string): Promise<void> {
    await this.client.send(
      new PutObjectCommand({ Bucket: this.bucket, Key: s3Key(name), Body: bytes, ContentType: contentType, ContentLength: bytes.length, CacheControl: IMMUTABLE_CACHE_CONTROL }),
    );
  }

  async open(name: string): Promise<Readable | undefined> {
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: s3Key(name) }));
      return res.Body as Readable | undefined;
    } catch (err) {
      if (err instanceof S3ServiceException && (err.name === 'NoSuchKey' || err.$metadata.httpStatusCode === 404)) return undefined;
      throw err;
    }
  }

  async remove(name: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: s3Key(name) }));
  }
}

/** The object key of a stored name in the bucket; S3_PUBLIC_URL points at the bucket, so public URLs add the same prefix. */
export const s3Key = (name: string) => `uploads/${name}`;

const shared = new WeakMap<Config['uploads'], UploadStorage>();

/** One storage per configuration, made on first use (the upload routes and project deletion share it). */
export function uploadStorageFor(uploads: Config['uploads']): UploadStorage {
  let storage = shared.get(uploads);
  if (!storage) {
    storage = createUploadStorage(uploads);
    shared.set(uploads, storage);
  }
  return storage;
}

/** The storage the configuration selects: S3 when S3_BUCKET is set, else the local folder UPLOADS_DIR. */
function createUploadStorage(uploads: Config['uploads']): UploadStorage {
  const s3 = uploads.s3;
  if (!s3) return new LocalDiskStorage(uploads.dir);
  const client = new S3Client({
    region: s3.region,
    endpoint: s3.endpoint,
    forcePathStyle: s3.forcePathStyle,
    // Without keys, the SDK's own chain (environment, shared files, instance or task role) applies.
    credentials: s3.accessKeyId && s3.secretAccessKey ? { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } : undefined,
    // Checksums only where S3 requires them: S3-compatible servers differ in which of the newer default checksum
    // headers and aws-chunked bodies they understand, and the body is a buffer whose length is known anyway.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return new S3Storage(client, s3.bucket);
}
