{{ full_table_history('app_resource_types') }}
