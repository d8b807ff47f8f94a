; TypeScript-only rules, appended to ecmascript.scm for .ts and .tsx files.

; ---- definitions ----------------------------------------------------------
(interface_declaration name: (type_identifier) @name) @definition.interface
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(internal_module name: (_) @name) @definition.module
(method_signature name: (_) @name) @definition.method
(abstract_method_signature name: (_) @name) @definition.method
(function_signature name: (identifier) @name) @definition.function
(public_field_definition
  name: (property_identifier) @name
  value: [(arrow_function) (function_expression)]) @definition.method

; ---- type references ------------------------------------------------------
(nested_type_identifier module: (_) @qualifier name: (type_identifier) @name) @reference.type
(type_identifier) @name @reference.type
