import { z } from 'zod';
import { emailString } from '../validation';

export const SignupBody = z
  .object({ email: emailString, password: z.string().min(8, 'At least 8 characters').max(256), name: z.string().min(1).max(200).optional() })
  .meta({ id: 'SignupRequest' });

export const LoginBody = z.object({ email: emailString, password: z.string().min(1).max(256) }).meta({ id: 'LoginRequest' });
