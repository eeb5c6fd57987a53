import { imageSize } from 'image-size';
import type { UploadContentType } from './upload.entity';

export interface SniffedImage {
  contentType: UploadContentType;
  /** The extension of its public file name. */
  ext: 'png' | 'jpg' | 'gif' | 'webp';
  width: number;
  height: number;
}

/** Why a file is not accepted; `code` is the field error's code on `file`. */
export class ImageRejected extends Error {
  constructor(
    readonly code: 'empty_file' | 'svg_not_allowed' | 'unsupported_image_type' | 'invalid_image',
    message: string,
  ) {
    super(message);
  }
}

const startsWith = (bytes: Buffer, signature: number[], at = 0) => bytes.length >= at + signature.length && signature.every((b, i) => bytes[at + i] === b);
const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));

/** Magic numbers of the accepted types, and the type name image-size gives each (it must agree). */
const SIGNATURES: { test: (b: Buffer) => boolean; image: Omit<SniffedImage, 'width' | 'height'>; sizeType: string }[] = [
  { test: (b) => startsWith(b, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), image: { contentType: 'image/png', ext: 'png' }, sizeType: 'png' },
  { test: (b) => startsWith(b, [0xff, 0xd8, 0xff]), image: { contentType: 'image/jpeg', ext: 'jpg' }, sizeType: 'jpg' },
  { test: (b) => startsWith(b, ascii('GIF87a')) || startsWith(b, ascii('GIF89a')), image: { contentType: 'image/gif', ext: 'gif' }, sizeType: 'gif' },
  { test: (b) => startsWith(b, ascii('RIFF')) && startsWith(b, ascii('WEBP'), 8), image: { contentType: 'image/webp', ext: 'webp' }, sizeType: 'webp' },
];

/** An SVG (or SVG inside XML/HTML-ish text): refused by name, since it is the one "image" that can carry script. */
function looksLikeSvg(bytes: Buffer): boolean {
  const head = bytes.subarray(0, 4096).toString('utf8').replace(/^\uFEFF/, '').trimStart();
  return head.startsWith('<') && /<svg[\s>/]/i.test(head);
}

/**
 * What an uploaded file is, decided by its bytes alone (the client's file name and Content-Type are not trusted):
 * PNG, JPEG, GIF or WebP by its magic number, and only if its header also parses as that type with a size (so a
 * script behind a PNG signature is refused too). SVG is refused, since it can carry script. Throws ImageRejected.
 */
export function sniffImage(bytes: Buffer): SniffedImage {
  if (bytes.length === 0) throw new ImageRejected('empty_file', 'The file is empty');
  const match = SIGNATURES.find((s) => s.test(bytes));
  if (!match) {
    if (looksLikeSvg(bytes)) throw new ImageRejected('svg_not_allowed', 'SVG images are not accepted (they can carry script); upload a PNG, JPEG, GIF or WebP');
    throw new ImageRejected('unsupported_image_type', 'The file is not a PNG, JPEG, GIF or WebP image (its content decides, not its name)');
  }
  let size: { width?: number; height?: number; type?: string };
  try {
    // image-size reads its numbers through a DataView over the whole ArrayBuffer behind the view it is given, not
    // bounded by the view: a truncated header in a view of a larger buffer (Node's shared pool for small Buffers, a
    // slice of a request) reads whatever bytes follow it as a width and height. Given memory of exactly these bytes,
    // a read past the end throws instead.
    const exact = bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.length ? bytes : new Uint8Array(bytes);
    size = imageSize(exact);
  } catch {
    size = {};
  }
  const { width, height } = size;
  if (size.type !== match.sizeType || !width || !height) {
    throw new ImageRejected('invalid_image', `The file starts like a ${match.image.ext.toUpperCase()} image but is not a valid one`);
  }
  return { ...match.image, width, height };
}
