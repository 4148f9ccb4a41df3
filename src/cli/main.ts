import { runCli } from './program.ts';

// A reader that closed the pipe (`herald tokens create … | head -1`) has what it wanted: the rest
// of the output is dropped, and the command still finishes, instead of dying on EPIPE mid-way.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE' && error.code !== 'ERR_STREAM_DESTROYED') throw error;
});
const code = await runCli(process.argv.slice(2));
// A failure ends the process at once, whatever it left open; success lets it end on its own (a
// service runs until a signal).
if (code !== 0) process.exit(code);
