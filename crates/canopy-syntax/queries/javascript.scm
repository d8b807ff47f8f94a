; JavaScript-only rules, appended to ecmascript.scm for .js/.mjs/.cjs/.jsx files.

; Class fields holding functions are methods.
(field_definition
  property: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.method

; `class Router extends EventEmitter`: the superclass is a type reference.
(class_heritage (identifier) @name) @reference.type
(class_heritage
  (member_expression object: (_) @qualifier property: (property_identifier) @name)) @reference.type
