{{ full_table_history('apps') }}
