export * from './filter.types';
export { validateFilter, parseFilter } from './filter.validate';
export { andFilters, compileFilter, fixedFilter, pgTextArray, type CompiledFilter } from './filter.compile';
export { FilterSchema, EventDataFilterSchema, asFilter } from './filter.schema';
