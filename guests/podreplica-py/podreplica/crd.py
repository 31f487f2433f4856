"""The PodReplica CustomResourceDefinition, the same one the Rust PodReplica declares
(`deploy/crds/podreplica.yaml`; the conformance test compares them)."""

# fmt: off
CRD = {'apiVersion': 'apiextensions.k8s.io/v1',
 'kind': 'CustomResourceDefinition',
 'metadata': {'name': 'podreplicas.app.example.com'},
 'spec': {'group': 'app.example.com',
          'names': {'kind': 'PodReplica',
                    'plural': 'podreplicas',
                    'shortNames': ['pr'],
                    'singular': 'podreplica'},
          'scope': 'Namespaced',
          'versions': [{'additionalPrinterColumns': [{'description': 'Desired number of pods',
                                                      'jsonPath': '.spec.size',
                                                      'name': 'Desired',
                                                      'type': 'integer'},
                                                     {'description': 'Live pods',
                                                      'jsonPath': '.status.replicas',
                                                      'name': 'Live',
                                                      'type': 'integer'},
                                                     {'description': 'Ready pods',
                                                      'jsonPath': '.status.readyReplicas',
                                                      'name': 'Ready',
                                                      'type': 'integer'},
                                                     {'jsonPath': '.metadata.creationTimestamp',
                                                      'name': 'Age',
                                                      'type': 'date'}],
                        'name': 'v1alpha1',
                        'schema': {'openAPIV3Schema': {'description': 'Auto-generated derived '
                                                                      'type for PodReplicaSpec '
                                                                      'via `CustomResource`',
                                                       'properties': {'spec': {'description': 'Keep '
                                                                                              '`size` '
                                                                                              'pods '
                                                                                              'of '
                                                                                              'one '
                                                                                              'image '
                                                                                              'running, '
                                                                                              'like '
                                                                                              'the '
                                                                                              "article's "
                                                                                              'PodReplica '
                                                                                              'operator.',
                                                                               'properties': {'command': {'description': 'Command '
                                                                                                                         'of '
                                                                                                                         'the '
                                                                                                                         "pods' "
                                                                                                                         'container '
                                                                                                                         '(default '
                                                                                                                         '`sleep '
                                                                                                                         '3600`).',
                                                                                                          'items': {'type': 'string'},
                                                                                                          'nullable': True,
                                                                                                          'type': 'array'},
                                                                                              'image': {'description': 'Container '
                                                                                                                       'image '
                                                                                                                       'of '
                                                                                                                       'the '
                                                                                                                       'pods '
                                                                                                                       '(default '
                                                                                                                       '`busybox`).',
                                                                                                        'minLength': 1,
                                                                                                        'nullable': True,
                                                                                                        'type': 'string'},
                                                                                              'size': {'description': 'Number '
                                                                                                                      'of '
                                                                                                                      'pods '
                                                                                                                      'to '
                                                                                                                      'keep '
                                                                                                                      'running, '
                                                                                                                      'from '
                                                                                                                      '0 '
                                                                                                                      'to '
                                                                                                                      '100.',
                                                                                                       'format': 'int32',
                                                                                                       'maximum': 100.0,
                                                                                                       'minimum': 0.0,
                                                                                                       'type': 'integer'}},
                                                                               'required': ['size'],
                                                                               'type': 'object'},
                                                                      'status': {'description': 'What '
                                                                                                'the '
                                                                                                'operator '
                                                                                                'saw '
                                                                                                'and '
                                                                                                'did.',
                                                                                 'nullable': True,
                                                                                 'properties': {'conditions': {'default': [],
                                                                                                               'description': '`Ready`: '
                                                                                                                              'all '
                                                                                                                              'desired '
                                                                                                                              'pods '
                                                                                                                              'are '
                                                                                                                              'live '
                                                                                                                              'and '
                                                                                                                              'ready.',
                                                                                                               'items': {'description': 'One '
                                                                                                                                        'status '
                                                                                                                                        'condition '
                                                                                                                                        '(`metav1.Condition` '
                                                                                                                                        'shape).',
                                                                                                                         'properties': {'lastTransitionTime': {'description': 'When '
                                                                                                                                                                              'the '
                                                                                                                                                                              'status '
                                                                                                                                                                              'last '
                                                                                                                                                                              'changed '
                                                                                                                                                                              '(RFC '
                                                                                                                                                                              '3339).',
                                                                                                                                                               'type': 'string'},
                                                                                                                                        'message': {'default': '',
                                                                                                                                                    'description': 'Human-readable '
                                                                                                                                                                   'details.',
                                                                                                                                                    'type': 'string'},
                                                                                                                                        'observedGeneration': {'description': 'The '
                                                                                                                                                                              '`metadata.generation` '
                                                                                                                                                                              'this '
                                                                                                                                                                              'condition '
                                                                                                                                                                              'was '
                                                                                                                                                                              'computed '
                                                                                                                                                                              'for.',
                                                                                                                                                               'format': 'int64',
                                                                                                                                                               'nullable': True,
                                                                                                                                                               'type': 'integer'},
                                                                                                                                        'reason': {'description': 'CamelCase '
                                                                                                                                                                  'reason '
                                                                                                                                                                  'for '
                                                                                                                                                                  'the '
                                                                                                                                                                  'last '
                                                                                                                                                                  'transition.',
                                                                                                                                                   'type': 'string'},
                                                                                                                                        'status': {'description': '`True`, '
                                                                                                                                                                  '`False` '
                                                                                                                                                                  'or '
                                                                                                                                                                  '`Unknown`.',
                                                                                                                                                   'type': 'string'},
                                                                                                                                        'type': {'description': 'Condition '
                                                                                                                                                                'type, '
                                                                                                                                                                'e.g. '
                                                                                                                                                                '`Ready`.',
                                                                                                                                                 'type': 'string'}},
                                                                                                                         'required': ['lastTransitionTime',
                                                                                                                                      'reason',
                                                                                                                                      'status',
                                                                                                                                      'type'],
                                                                                                                         'type': 'object'},
                                                                                                               'type': 'array'},
                                                                                                'observedGeneration': {'description': 'The '
                                                                                                                                      '`metadata.generation` '
                                                                                                                                      'this '
                                                                                                                                      'status '
                                                                                                                                      'describes.',
                                                                                                                       'format': 'int64',
                                                                                                                       'nullable': True,
                                                                                                                       'type': 'integer'},
                                                                                                'pods': {'default': [],
                                                                                                         'description': 'Names '
                                                                                                                        'of '
                                                                                                                        'the '
                                                                                                                        'live '
                                                                                                                        'pods, '
                                                                                                                        'sorted.',
                                                                                                         'items': {'type': 'string'},
                                                                                                         'type': 'array'},
                                                                                                'readyReplicas': {'default': 0,
                                                                                                                  'description': 'Number '
                                                                                                                                 'of '
                                                                                                                                 'live '
                                                                                                                                 'pods '
                                                                                                                                 'that '
                                                                                                                                 'are '
                                                                                                                                 'Ready.',
                                                                                                                  'format': 'int32',
                                                                                                                  'type': 'integer'},
                                                                                                'replicas': {'default': 0,
                                                                                                             'description': 'Number '
                                                                                                                            'of '
                                                                                                                            'live '
                                                                                                                            'pods.',
                                                                                                             'format': 'int32',
                                                                                                             'type': 'integer'}},
                                                                                 'type': 'object'}},
                                                       'required': ['spec'],
                                                       'title': 'PodReplica',
                                                       'type': 'object'}},
                        'served': True,
                        'storage': True,
                        'subresources': {'status': {}}}]}}
