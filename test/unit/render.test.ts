import { renderTemplate } from '../../domain/rendering/render';

describe('renderTemplate', () => {
  test('renders variables and filters', () => {
    expect(renderTemplate('Hi {{ name | upcase }}', { name: 'ada' })).toBe('Hi ADA');
  });
  test('unknown variables render empty', () => {
    expect(renderTemplate('Hi {{ missing }}!', {})).toBe('Hi !');
  });
  test('include, render and layout cannot read files', () => {
    expect(() => renderTemplate("{% include '/etc/passwd' %}", {})).toThrow();
    expect(() => renderTemplate("{% render 'x' %}", {})).toThrow();
  });
  test('a source without Liquid markup is returned as is', () => {
    const s = '<p>plain</p>';
    expect(renderTemplate(s, {})).toBe(s);
  });
});
