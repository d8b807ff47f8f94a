; Canopy extraction rules for Go (tags-query capture names; see lang/extract.rs).

; ---- definitions ----------------------------------------------------------
(function_declaration name: (identifier) @name) @definition.function
(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (type_identifier) @receiver
        (pointer_type (type_identifier) @receiver)
        (generic_type type: (type_identifier) @receiver)
        (pointer_type (generic_type type: (type_identifier) @receiver))
      ]))
  name: (field_identifier) @name) @definition.method
(type_spec name: (type_identifier) @name type: (struct_type)) @definition.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface
(type_spec name: (type_identifier) @name) @definition.type
(type_alias name: (type_identifier) @name) @definition.type
(method_elem name: (field_identifier) @name) @definition.method
(const_spec name: (identifier) @name) @definition.constant

; ---- calls ----------------------------------------------------------------
(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (selector_expression operand: (_) @qualifier field: (field_identifier) @name)) @reference.call

; ---- imports --------------------------------------------------------------
(import_spec path: (_) @name) @reference.import

; ---- type references ------------------------------------------------------
(qualified_type package: (package_identifier) @qualifier name: (type_identifier) @name) @reference.type
(type_identifier) @name @reference.type
