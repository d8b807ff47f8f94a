; JavaScript-only rules, appended to ecmascript.scm for .js/.mjs/.cjs/.jsx files.

; Class fields holding functions are methods.
(field_definition
  property: (property_identifier) @name
  value: [(arrow_function) (function_expression)]) @definition.method
