/** Unit tests of the DOM-free modules (src/model.ts, series, readings, space, format, axes, live): no DOM, no JupyterLab. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  }
};
