/**
 * A slug from a segment name: lowercase ASCII letters, digits and hyphens, at most 48 characters. It names the
 * segment's events (`segment.<slug>.entry`), so it never contains a dot.
 */
export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48)
    .replace(/-+$/g, '');
  return slug || 'segment';
}
