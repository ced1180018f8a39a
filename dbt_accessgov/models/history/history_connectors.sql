{{ full_table_history('connectors') }}
