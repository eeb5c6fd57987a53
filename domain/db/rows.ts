/**
 * Row types of raw queries come from the entities, declared once: a raw row is the entity's properties in camelCase,
 * with its relations as `<name>Id` (see the types next to each entity). Selects name their columns through
 * `selectList`, whose names are checked against that row type when compiling; the stack test
 * test/integration/row-types.test.ts checks the entities against the migrated database, so a renamed column fails.
 */

/** The column of a camelCase property (MikroORM's default naming strategy). */
export const columnOf = (property: string): string => property.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** `to_email as "toEmail", ...`, optionally qualified by a table alias. */
export function selectList<Row>(properties: readonly (keyof Row & string)[], alias?: string): string {
  return properties.map((p) => `${alias ? `${alias}.` : ''}${columnOf(p)} as "${p}"`).join(', ');
}
