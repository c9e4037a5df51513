import { pathPieces, plainProse, proseParts } from '../src/format';

describe('words in the panel (issue 36)', () => {
  it('breaks a path only after a slash', () => {
    expect(pathPieces('/root/notebooks')).toEqual(['/', 'root/', 'notebooks']);
    expect(pathPieces('/a/b/')).toEqual(['/', 'a/', 'b/']);
    expect(pathPieces('rel')).toEqual(['rel']);
    expect(pathPieces('/root/notebooks').join('')).toBe('/root/notebooks');
  });

  it('sets what a sentence quotes in backticks as code, without the backticks', () => {
    expect(proseParts('detach it with `umount -l /mnt`.')).toEqual([
      { text: 'detach it with ', code: false },
      { text: 'umount -l /mnt', code: true },
      { text: '.', code: false }
    ]);
    expect(plainProse('use `local_mirror(d)` here')).toBe('use local_mirror(d) here');
    expect(proseParts('a lone ` stays')).toEqual([{ text: 'a lone ` stays', code: false }]);
  });
});
