import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';
import prettierRecommended from 'eslint-plugin-prettier/recommended';
import globals from 'globals';
import jupyterPlugin from '@jupyter/eslint-plugin';

// jupyterlab/extension-template's config (ESLint 9, flat), with three changes:
// - js/test/ is linted too (against tsconfig.test.json): our jest specs are TypeScript like src/;
// - jupyter/no-untranslated-string is off: the extension is not translated (no ITranslator);
//   wrapping every label in trans.__() is a feature to add, not a lint fix;
// - eqeqeq lets `x != null` through: the one loose comparison we mean, a JSON field that is
//   null or absent; every other comparison stays strict.
// (The template's '@typescript-eslint/quotes' is left out: typescript-eslint 8 dropped the rule
// and eslint-config-prettier turns it off; Prettier's singleQuote does that job.)
export default defineConfig([
  {
    ignores: ['node_modules', 'lib', 'dist', 'coverage', '**/*.js', '**/*.d.ts', '.venv']
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    plugins: {
      jupyter: jupyterPlugin
    }
  },
  jupyterPlugin.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: {
      globals: {
        ...globals.browser,
        ...globals.es2015,
        ...globals.node
      },
      parserOptions: {
        project: ['tsconfig.json', 'tsconfig.test.json'],
        sourceType: 'module'
      }
    },
    rules: {
      '@typescript-eslint/naming-convention': [
        'error',
        {
          selector: 'interface',
          format: ['PascalCase'],
          custom: {
            regex: '^I[A-Z]',
            match: true
          }
        }
      ],
      '@typescript-eslint/no-unused-vars': ['warn', { args: 'none' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-namespace': 'off',
      '@typescript-eslint/no-use-before-define': 'off',
      'jupyter/no-untranslated-string': 'off',
      curly: ['error', 'all'],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'prefer-arrow-callback': 'error'
    }
  },
  prettierRecommended
]);
