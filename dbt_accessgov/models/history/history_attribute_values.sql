{{ full_table_history('attribute_values') }}
