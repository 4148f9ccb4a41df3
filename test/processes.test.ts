// The suites that spawn Herald processes and then kill them (crash, webhook-crash), time how fast
// they recover from faults (chaos), or load both cores for a while (a 25,000-installation
// broadcast), one after another in this one file. On two cores, two of them at once made a
// recovery bound measure their contention rather than Herald; as files of their own they took
// turns through a lock, and a file waiting for its turn held one of jest's workers idle.
import './processes/crash.ts';
import './processes/chaos.ts';
import './processes/broadcast.ts';
import './processes/webhook-crash.ts';
