// The node test environment, telling a test file whether its current test has failed
// (`globalThis.testFailed`): an afterEach can then keep what the failure looked like (browser tests
// screenshot their pages). Chosen per file with a `@jest-environment` docblock.
import { TestEnvironment } from 'jest-environment-node';

export default class FailureAwareEnvironment extends TestEnvironment {
  async handleTestEvent(event) {
    if (event.name === 'test_start') this.global.testFailed = false;
    if (event.name === 'test_fn_failure' || event.name === 'hook_failure') this.global.testFailed = true;
  }
}
