/** cotwire's version; a test keeps it equal to package.json's. */
export const COTWIRE_VERSION = '0.1.0';
