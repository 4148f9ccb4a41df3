// Audiences: who a send to an `audience` or a `segment` reaches among an application's
// installations. The document states the shape (db/sql/audiences.ts turns it into SQL); the rules
// here are those a schema cannot state: an audience says something (a broadcast is never an
// accident), `all` stands alone, and each tag operator takes the operand it needs.
import type { components } from '../generated/api.ts';
import { addFieldError, fieldErrors, type FieldErrors } from './errors.ts';

export type Audience = components['schemas']['Audience'];
export type AudienceTagCondition = components['schemas']['AudienceTagCondition'];
export type TagOperator = AudienceTagCondition['op'];

export const emptyAudienceMessage = 'The audience needs at least one condition, or all: true to reach every installation.';
export const allWithConditionsMessage = 'all: true cannot be combined with other conditions.';

/** The operand each tag operator takes: `value`, `values`, or neither. */
const operandOf: Record<TagOperator, 'value' | 'values' | null> = {
  eq: 'value',
  ne: 'value',
  in: 'values',
  exists: null,
  not_exists: null,
};

const conditionKeys = ['platforms', 'tags', 'locales', 'active_within_days'] as const;

/** Whether the audience states a condition (an array given empty states none). */
function conditions(audience: Audience): string[] {
  return conditionKeys.filter((key) => {
    const value = audience[key];
    return Array.isArray(value) ? value.length > 0 : value !== undefined && value !== null;
  });
}

/**
 * What is wrong with an audience the document's schema accepted, keyed by field path under
 * `field` (`recipients.audience`, `audience`); empty when nothing is.
 */
export function audienceErrors(audience: Audience, field: string, errors: FieldErrors = fieldErrors()): FieldErrors {
  const given = conditions(audience);
  if (audience.all === true && given.length > 0) addFieldError(errors, field, allWithConditionsMessage);
  else if (audience.all !== true && given.length === 0) addFieldError(errors, field, emptyAudienceMessage);
  (audience.tags ?? []).forEach((condition, index) => {
    const operand = operandOf[condition.op];
    const at = `${field}.tags.${index}`;
    for (const name of ['value', 'values'] as const) {
      const present = condition[name] !== undefined;
      if (name === operand && !present) addFieldError(errors, `${at}.${name}`, `The ${name} field is required when op is ${condition.op}.`);
      if (name !== operand && present) addFieldError(errors, `${at}.${name}`, `The ${name} field is not allowed when op is ${condition.op}.`);
    }
  });
  return errors;
}

/** Whether an audience is every installation (no condition narrows it). */
export const isEveryone = (audience: Audience): boolean => audience.all === true && conditions(audience).length === 0;
