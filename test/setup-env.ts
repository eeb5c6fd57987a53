// Test files log only what matters; the API and worker processes log to files in the stack's data folder.
process.env.LOG_LEVEL ??= 'silent';
