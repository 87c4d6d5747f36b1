// Its own module, with no import of the suite's environment: the chaos run (`npm run chaos`) uses it outside the suite.
/** A customer object that passes every create-card check; each call has its own passport number. */
export const validCustomer = (overrides: Record<string, unknown> = {}) => ({
  customer_type: 'individual',
  first_name: 'Ada',
  last_name: 'Lovelace',
  email: 'ada@example.com',
  phone_number: '5550100',
  dial_code: '+1',
  date_of_birth: '1990-12-10',
  id_type: 'passport',
  id_number: `P${Math.floor(Math.random() * 1e7)}`.padEnd(8, '0'),
  line1: '1 Main St',
  city: 'Springfield',
  state: 'IL',
  postal_code: '62701',
  country: 'USA',
  ...overrides,
});
