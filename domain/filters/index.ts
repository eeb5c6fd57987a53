export * from './filter.types';
export { validateFilter, parseFilter } from './filter.validate';
export { compileFilter, toPositional, pgTextArray, type CompiledFilter } from './filter.compile';
export { FilterSchema, EventDataFilterSchema, asFilter } from './filter.schema';
